// A student's side panel under /user/<name>/, in a real Chromium, for docs/screenshots/hub-side-panel.png.
//
// Logs in through the hub's login form (HUB_URL, HUB_USER, HUB_PASSWORD), opens the student's
// lab1.ipynb under /user/<name>/lab, opens the gradcheck side panel with its palette command (as
// ui-tests/tests/panelHelpers.ts does), runs a second check (sin(x)) from the panel's form and
// saves the notebook, saves the screenshot at SCREENSHOT, then tries HUB_OTHER_USER's server with
// the same login, and prints one JSON line: the page's path, JupyterLab's base URL, the checks the
// panel lists, its header's chain line and the status the other student's server answered.
import { chromium } from 'playwright-core';

const hub = process.env.HUB_URL;
const user = process.env.HUB_USER;
const password = process.env.HUB_PASSWORD;
const screenshot = process.env.SCREENSHOT;
const other = process.env.HUB_OTHER_USER;
if (!hub || !user || !password || !screenshot) {
  console.error('side-panel-screenshot: set HUB_URL, HUB_USER, HUB_PASSWORD and SCREENSHOT');
  process.exit(2);
}

/** Retry `step` until it succeeds or `timeout` ms pass (a palette that a notebook closes under it). */
async function retry(step, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      return await step();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise(resolve => setTimeout(resolve, 500));
    }
  }
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run']
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(60000);

  await page.goto(`${hub}/hub/login`);
  await page.fill('#username_input', user);
  await page.fill('#password_input', password);
  await page.click('#login_submit');
  // The hub sends a logged-in student to her running server, through its OAuth handshake.
  await page.waitForURL(url => url.pathname.startsWith(`/user/${user}/lab`), { timeout: 120000 });

  await page.goto(`${hub}/user/${user}/lab/tree/lab1.ipynb`);
  await page.locator('.jp-NotebookPanel').first().waitFor({ state: 'visible', timeout: 120000 });
  // While the kernel starts, the notebook takes the focus back and closes a palette opened meanwhile.
  await page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first().waitFor({ timeout: 120000 });

  const input = page.locator('.lm-CommandPalette-input');
  const labels = page.locator('.lm-CommandPalette-item .lm-CommandPalette-itemLabel');
  await retry(async () => {
    if (!(await input.isVisible())) {
      // JupyterLab's own shortcut for the command palette (no test hooks in a plain JupyterLab).
      await page.locator('.jp-NotebookPanel').first().click({ position: { x: 400, y: 300 }, timeout: 2000 });
      await page.keyboard.press('Control+Shift+C');
    }
    await input.waitFor({ state: 'visible', timeout: 2000 });
    await input.fill('', { timeout: 2000 });
    await input.fill('Gradient check', { timeout: 2000 });
    const first = (await labels.first().textContent({ timeout: 2000 })) ?? '';
    if (first.trim() !== 'Gradient check: open panel') throw new Error(`first palette item: ${first}`);
    await labels.first().click({ timeout: 2000 });
  }, 60000);

  const panel = page.locator('[data-testid="gradcheck-panel"]');
  await panel.waitFor({ state: 'visible' });
  const cards = panel.locator('[data-testid="gradcheck-check"]');
  await cards.first().waitFor({ state: 'visible' });
  // A second check, declared and run in the panel as a student does (its requests go to
  // /user/<name>/gradcheck/ through JupyterLab's ServerConnection), then the notebook saved.
  await panel.locator('[data-testid="gradcheck-field-function"]').fill('sin(x)');
  await panel.locator('[data-testid="gradcheck-field-inputs"]').fill('{"x": 0.5}');
  await panel.locator('[data-testid="gradcheck-field-analytical-gradient"]').fill('cos(x)');
  await panel.locator('[data-testid="gradcheck-run"]').click();
  await cards.nth(1).waitFor({ state: 'visible', timeout: 120000 });
  await page.locator('.jp-NotebookPanel').first().click({ position: { x: 400, y: 300 } });
  await page.keyboard.press('Control+S');
  await page.locator('.jp-mod-dirty').first().waitFor({ state: 'detached', timeout: 30000 }).catch(() => {});
  // Read again from the server: the saved notebook's binding now names the ledger's head.
  await panel.getByRole('button', { name: 'Refresh', exact: true }).click();
  await panel.getByText('binding broken').waitFor({ state: 'detached', timeout: 20000 }).catch(() => {});
  // The declare form folded away, so the checks show; JupyterLab's news prompt dismissed.
  await panel.locator('summary', { hasText: 'Declare a check' }).first().click();
  await page.getByRole('button', { name: 'No', exact: true }).click({ timeout: 3000 }).catch(() => {});
  await page.waitForTimeout(500);
  const chain = (await panel.locator('[data-testid="gradcheck-chain"]').textContent()) ?? '';
  const checks = await cards.evaluateAll(nodes =>
    nodes.map(node => ({ id: node.getAttribute('data-check-id'), status: node.getAttribute('data-status') }))
  );
  const baseUrl = await page.evaluate(() => {
    const config = document.getElementById('jupyter-config-data');
    return config ? JSON.parse(config.textContent).baseUrl : null;
  });
  await page.screenshot({ path: screenshot });
  const path = new URL(page.url()).pathname;
  // The same logged-in browser at another student's server: the hub's OAuth step refuses it.
  let otherStatus = null;
  if (other) {
    const answer = await page.goto(`${hub}/user/${other}/lab`);
    otherStatus = answer ? answer.status() : null;
  }
  console.log(JSON.stringify({ path, baseUrl, checks, chain, otherStatus }));
} finally {
  await browser.close();
}
