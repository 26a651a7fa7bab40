/**
 * The side panel in a real JupyterLab and Chromium, as a new user meets it.
 *
 * Each test works in its own temporary folder (Galata's tmpPath) under a
 * server root that is itself a fresh temporary folder, so no ledger is left
 * over from an earlier run or an earlier test.
 */
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import {
  PANEL_ID,
  SCREENSHOTS,
  declare,
  openNotebook,
  openPanel
} from './panelHelpers';

/**
 * The columns the CSV export promises (`jupyter gradcheck export --format csv`), written
 * out here rather than imported, so a renamed column fails this test.
 */
const CSV_COLUMNS = [
  'student_id',
  'assignment_id',
  'notebook_id',
  'check_id',
  'function',
  'inputs',
  'dtype',
  'device',
  'analytical',
  'observed',
  'max_abs_err',
  'max_rel_err',
  'rtol',
  'atol',
  'passed',
  'runs',
  'failures_kept',
  'tolerance_edits',
  'widened_after_failure',
  'expectation_revised_after_observation',
  'chain_ok',
  'binding_ok',
  'status',
  'witnessed',
  'witness_flags'
];

test.use({ autoGoto: true });

test('declare, run, keep a failure, justify a tolerance and export', async ({
  page,
  tmpPath
}) => {
  const notebookPath = await openNotebook(page, tmpPath);

  // Given the panel, opened from the palette, with its icon tab and tooltip in the right sidebar
  const panel = await openPanel(page);
  const tab = page.locator(`.jp-SideBar.jp-mod-right [data-id="${PANEL_ID}"]`);
  await expect(tab).toHaveAttribute('title', /Gradient check/);
  await expect(panel.getByTestId('gradcheck-notebook')).toHaveText(
    'lab1.ipynb'
  );
  await expect(panel.getByTestId('gradcheck-field-device')).toHaveValue('cpu');

  // When the seed check is declared (x*x at 3, analytical 6) and run
  await declare(panel, {
    function: 'x*x',
    inputs: '{"x": 3}',
    analytical: '6'
  });

  // Then it passes, with 6 under Expectation and 6.0 under Observation
  const cards = panel.getByTestId('gradcheck-check');
  await expect(cards).toHaveCount(1, { timeout: 30000 });
  const seed = cards.first();
  await expect(seed.getByTestId('gradcheck-badge')).toHaveText('passed');
  await expect(seed.getByTestId('gradcheck-expectation-value')).toHaveText('6');
  await expect(seed.getByTestId('gradcheck-observation-value')).toHaveText(
    '6.0'
  );
  await expect(seed.getByTestId('gradcheck-observation-meta')).toHaveText(
    'shape [] scalar · float64 · cpu'
  );
  await expect(panel.getByTestId('gradcheck-chain-badge')).toHaveText(
    'chain OK'
  );

  // And the notebook model is bound to the ledger (expectation + observation = 2 entries)
  const binding = await page.evaluate(() => {
    const app = (window as any).jupyterapp;
    return app.shell.currentWidget.model.getMetadata('gradcheck');
  });
  expect(binding.ledger).toBe('lab1.gradcheck.jsonl');
  expect(binding.entries).toBe(2);
  expect(binding.head).toMatch(/^[0-9a-f]{64}$/);

  // When 3*x is declared as the derivative of x*x at 2 and run
  await declare(panel, {
    function: 'x*x',
    inputs: '{"x": 2}',
    analytical: '3*x'
  });

  // Then the failure stays visible with its diagnosis
  await expect(cards).toHaveCount(2, { timeout: 30000 });
  const wrong = panel.locator(
    '[data-testid="gradcheck-check"][data-status="failed"]'
  );
  await expect(wrong).toHaveCount(1);
  await expect(wrong.getByTestId('gradcheck-expectation-value')).toHaveText(
    '3*x'
  );
  await expect(wrong.getByTestId('gradcheck-observation-value')).toHaveText(
    '4.0'
  );
  await expect(wrong.getByTestId('gradcheck-failure')).toHaveCount(1);
  await expect(wrong.getByTestId('gradcheck-diagnosis')).toContainText(
    'diagnosis: probable bug'
  );

  // When the tolerance dialog is sent with a new rtol and no justification
  await wrong.getByTestId('gradcheck-edit-tolerance').click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toBeVisible();
  await dialog.getByTestId('gradcheck-dialog-rtol').fill('0.5');
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();

  // Then it refuses: the dialog stays open and says a justification is required
  await expect(dialog).toBeVisible();
  await expect(
    dialog.getByTestId('gradcheck-dialog-error-justification')
  ).toContainText('a justification is required');
  await expect(wrong.getByTestId('gradcheck-history-item')).toHaveCount(0);

  // When a real justification is written
  await dialog
    .getByTestId('gradcheck-dialog-justification')
    .fill(
      '3*x was a slip for 2*x; loosened only to show how a widening is flagged'
    );
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();

  // Then the change shows in the history, flagged "widened after failure", and the failure is still kept
  await expect(dialog).toBeHidden();
  const item = wrong.getByTestId('gradcheck-history-item');
  await expect(item).toHaveCount(1);
  await expect(item.getByTestId('gradcheck-flag')).toHaveText(
    'widened after failure'
  );
  await expect(item.getByTestId('gradcheck-justification')).toContainText(
    '3*x was a slip for 2*x'
  );
  await expect(wrong.getByTestId('gradcheck-failure')).toHaveCount(1);
  await expect(wrong.getByTestId('gradcheck-tolerance')).toContainText(
    'rtol 0.5'
  );

  // When Verify is pressed (it saves the notebook, so the binding on disk is current)
  await panel.getByTestId('gradcheck-verify').click();
  // Then the chain and the binding hold, and the widening is listed for the grader
  const report = panel.getByTestId('gradcheck-verify-report');
  await expect(report).toHaveAttribute('data-ok', 'true', { timeout: 30000 });
  await expect(report).toContainText('chain OK · binding OK · 5 entries');
  await expect(report).toContainText('widened after failure');

  // When the ledger is exported as CSV
  await panel.getByTestId('gradcheck-export-format').selectOption('csv');
  const downloading = page.waitForEvent('download');
  await panel.getByTestId('gradcheck-export').click();
  const download = await downloading;

  // Then a file downloads whose header has the documented columns, one row per check
  expect(download.suggestedFilename()).toBe('lab1.gradcheck.csv');
  const csv = fs.readFileSync(await download.path(), 'utf-8');
  const lines = csv.split(/\r?\n/).filter(line => line.length > 0);
  expect(lines[0].split(',')).toEqual(CSV_COLUMNS);
  expect(lines).toHaveLength(3);
  expect(notebookPath.endsWith('lab1.ipynb')).toBe(true);

  // And screenshots of the panel are taken in the light and the dark theme
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.sidebar.setWidth(460, 'right');
  await panel.locator('details.jp-gradcheck-section > summary').first().click();
  await panel.evaluate(node => node.scrollTo(0, 0));
  await panel.screenshot({
    path: path.join(SCREENSHOTS, 'side-panel-light.png')
  });
  await page.theme.setDarkTheme();
  await expect(panel.getByTestId('gradcheck-check')).toHaveCount(2);
  await panel.screenshot({
    path: path.join(SCREENSHOTS, 'side-panel-dark.png')
  });
  await page.theme.setLightTheme();
});

test('server errors appear next to the field they name', async ({
  page,
  tmpPath
}) => {
  await openNotebook(page, tmpPath);
  const panel = await openPanel(page);

  // Given an unknown name in the function, which only the server's parser can judge
  await declare(panel, {
    function: 'x*y',
    inputs: '{"x": 3}',
    analytical: '6'
  });

  // Then the server's one-line message sits beside the function field, and nothing was recorded
  await expect(panel.getByTestId('gradcheck-error-function')).not.toBeEmpty({
    timeout: 30000
  });
  await expect(panel.getByTestId('gradcheck-error-function')).toContainText(
    'y'
  );
  await expect(panel.getByTestId('gradcheck-check')).toHaveCount(0);

  // And client-side validation catches malformed inputs before any request
  await declare(panel, { function: 'x*x', inputs: '{"x": }', analytical: '6' });
  await expect(panel.getByTestId('gradcheck-error-inputs')).toContainText(
    'not valid JSON'
  );
});

test('a missing server extension is named, with the command that fixes it', async ({
  page,
  tmpPath
}) => {
  // Given a server where the gradcheck routes do not exist: the browser then gets
  // the 404 that Jupyter Server answers for an unknown route
  await page.route('**/gradcheck/**', route =>
    route.fulfill({
      status: 404,
      contentType: 'text/html',
      body: '<html><title>404: Not Found</title></html>'
    })
  );
  await openNotebook(page, tmpPath);

  // When the panel opens
  const panel = await openPanel(page);

  // Then it says the server extension is missing and shows the fix, instead of failing silently
  const problem = panel.getByTestId('gradcheck-server-problem');
  await expect(problem).toBeVisible();
  await expect(problem).toContainText(
    'the server extension is not installed or not enabled',
    { ignoreCase: true }
  );
  await expect(panel.getByTestId('gradcheck-fix-command')).toHaveText(
    'jupyter server extension enable jupyterlab_gradcheck'
  );
  await expect(panel.getByTestId('gradcheck-declare-form')).toBeHidden();
});

test('the defaults of new checks are in the Settings Editor', async ({
  page
}) => {
  // When the Settings Editor is opened on the extension's settings
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('settingeditor:open', {
      query: 'Gradient check'
    })
  );

  // Then its plugin entry and the default dtype, device and tolerances are there
  await expect(
    page.locator('.jp-PluginList-entry', { hasText: 'Gradient check' })
  ).toBeVisible();
  const form = page.locator('.jp-SettingsPanel');
  for (const title of [
    'Default dtype',
    'Default device',
    'Default rtol',
    'Default atol'
  ]) {
    await expect(form.getByText(title, { exact: true }).first()).toBeVisible();
  }
});
