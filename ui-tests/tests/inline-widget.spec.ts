/**
 * The inline ipywidgets panel in a real JupyterLab and Chromium, as a student meets it:
 * a notebook cell displays the panel, the seed record is typed in, Run shows the table.
 *
 * The kernel is started by Jupyter Server for the notebook, so the ledger lands beside it
 * (JPY_SESSION_NAME). The widgets render through the stock ipywidgets lab extension.
 */
import { IJupyterLabPageFixture, expect, test } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';
import * as path from 'path';

import { SCREENSHOTS, codeNotebook } from './panelHelpers';

const SOURCE = [
  'from jupyterlab_gradcheck.widget import GradcheckPanel\n',
  'GradcheckPanel()'
];

const NOTEBOOK = codeNotebook(SOURCE);

// Tall enough that the whole panel and its result fit on screen for the screenshots.
test.use({ autoGoto: true, viewport: { width: 1280, height: 2400 } });

/** The text input of the panel field whose label is `label`. */
function field(panel: Locator, label: string): Locator {
  return panel
    .locator('.widget-inline-hbox', {
      has: panel.page().locator(`label:text-is("${label}")`)
    })
    .locator('input, textarea')
    .first();
}

/** The computed text colour of the table's header cell. */
async function headerColour(table: Locator): Promise<string> {
  return table
    .locator('th')
    .nth(1)
    .evaluate(cell => getComputedStyle(cell).color);
}

/** Open a new notebook `name` that displays the panel, run the seed check from it; the panel. */
async function runSeedFromThePanel(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  name: string
): Promise<Locator> {
  const file = `${tmpPath}/${name}.ipynb`;
  await page.contents.uploadContent(JSON.stringify(NOTEBOOK), 'text', file);
  await page.notebook.openByPath(file);
  await page.notebook.activate(`${name}.ipynb`);
  await page.notebook.runCell(0);

  const panel = page.locator('.jp-gradcheck-inline');
  await expect(panel).toBeVisible({ timeout: 60000 });
  await expect(
    panel.getByText(new RegExp(`ledger: .*${name}\\.gradcheck\\.jsonl`))
  ).toBeVisible();

  await field(panel, 'function').fill('x*x');
  await field(panel, 'inputs (JSON)').fill('{"x": 3}');
  await field(panel, 'analytical gradient').fill('6');
  await panel.getByRole('button', { name: 'Run check' }).click();
  await expect(
    panel.locator('table.jp-gradcheck-expectation-observation')
  ).toBeVisible({ timeout: 60000 });
  return panel;
}

test('a cell that displays the panel renders it, and Run shows expectation beside observation', async ({
  page,
  tmpPath
}) => {
  const panel = await runSeedFromThePanel(page, tmpPath, 'inline');
  const table = panel.locator('table.jp-gradcheck-expectation-observation');
  await expect(table.locator('thead th')).toHaveText([
    '',
    'Expectation',
    'Observation'
  ]);
  const row = table.locator('tr[data-input="x"] td');
  await expect(row.nth(1)).toHaveText('6');
  await expect(row.nth(2).locator('code')).toHaveText('6.0');
  await expect(row.nth(2).locator('.jp-gradcheck-meta')).toHaveText(
    'shape [] · dtype float64 · device cpu'
  );
  await expect(
    panel.locator('.jp-gradcheck-record .jp-gradcheck-badge').first()
  ).toHaveText('PASSED');
  await expect(panel.locator('svg.jp-gradcheck-sweep')).toBeVisible();
  expect(
    await page.contents.fileExists(`${tmpPath}/inline.gradcheck.jsonl`)
  ).toBe(true);

  await panel.screenshot({
    path: path.join(SCREENSHOTS, 'inline-panel-light.png')
  });

  // The colours follow the theme: the dark theme recolours the table's text.
  const light = await headerColour(table);
  await page.theme.setDarkTheme();
  await expect.poll(() => headerColour(table)).not.toBe(light);
  const themed = await page.evaluate(() =>
    getComputedStyle(document.body)
      .getPropertyValue('--jp-ui-font-color1')
      .trim()
  );
  const probe = await page.evaluate(colour => {
    const span = document.createElement('span');
    span.style.color = colour;
    document.body.appendChild(span);
    const resolved = getComputedStyle(span).color;
    span.remove();
    return resolved;
  }, themed);
  expect(await headerColour(table)).toBe(probe);
  await panel.screenshot({
    path: path.join(SCREENSHOTS, 'inline-panel-dark.png')
  });
  await page.theme.setLightTheme();
});

test('a check run from the inline panel binds the notebook, and saving keeps the binding', async ({
  page,
  tmpPath
}) => {
  // Given a notebook whose cell displays the panel, when the seed check is run from it
  await runSeedFromThePanel(page, tmpPath, 'bound');
  // Then the extension, told by the check's attestation, copies the ledger's head into the
  // notebook model's metadata (the kernel never writes the notebook file)
  const bound = () =>
    page.evaluate(() => {
      const widget = (window as any).jupyterapp.shell.currentWidget;
      return widget?.context?.model?.getMetadata('gradcheck') ?? null;
    });
  await expect
    .poll(async () => (await bound())?.entries, { timeout: 30000 })
    .toBe(2);
  // And once saved, the file on disk binds the ledger: its name, its id and its head
  await page.notebook.save();
  const saved = await page.evaluate(async file => {
    const model = await (window as any).jupyterapp.serviceManager.contents.get(
      file,
      { content: true }
    );
    return model.content.metadata.gradcheck;
  }, `${tmpPath}/bound.ipynb`);
  expect(saved.ledger).toBe('bound.gradcheck.jsonl');
  expect(saved.entries).toBe(2);
  expect(saved.ledger_id).toMatch(/^[0-9a-f]{32}$/);
  expect(saved.head).toMatch(/^[0-9a-f]{64}$/);
  expect(saved).toEqual(await bound());
});
