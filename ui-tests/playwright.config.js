/**
 * Playwright configuration for the Galata tests: a real JupyterLab with the
 * installed extension, driven through the system Chromium.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

module.exports = {
  ...baseConfig,
  reporter: 'list',
  // One long story per file; the whole suite stays under two minutes.
  timeout: 90000,
  retries: 0,
  workers: 1,
  use: {
    ...baseConfig.use,
    viewport: { width: 1280, height: 900 },
    video: 'off',
    trace: 'off',
    acceptDownloads: true,
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run'
      ]
    }
  },
  webServer: {
    command: 'jlpm start',
    url: 'http://localhost:8888/lab',
    timeout: 120 * 1000,
    reuseExistingServer: false
  }
};
