/**
 * What the side-panel UI tests share: a fresh notebook in the test's folder,
 * the panel opened through the command palette (whose first match for the
 * search must be opening the panel), and the declare form filled and run.
 */
import { expect, galata } from '@jupyterlab/galata';
import { Locator, Page } from '@playwright/test';
import * as path from 'path';

/** The panel's stable id (src/tokens.ts PANEL_ID). */
export const PANEL_ID = 'jupyterlab-gradcheck:panel';

/** Where the tests write the screenshots the docs show. */
export const SCREENSHOTS = path.resolve(
  __dirname,
  '..',
  '..',
  'docs',
  'screenshots'
);

/** A notebook of one cell on the Python 3 kernel, as the specs upload it. */
export function notebookOf(cell: { [key: string]: unknown }): {
  [key: string]: unknown;
} {
  return {
    cells: [{ metadata: {}, ...cell }],
    metadata: {
      kernelspec: {
        display_name: 'Python 3 (ipykernel)',
        language: 'python',
        name: 'python3'
      }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** A notebook whose one code cell holds `source`, not yet run. */
export function codeNotebook(source: string | string[]): {
  [key: string]: unknown;
} {
  return notebookOf({
    cell_type: 'code',
    execution_count: null,
    outputs: [],
    source
  });
}

const NOTEBOOK = notebookOf({
  cell_type: 'markdown',
  source: ['# Lab 1: gradients of x*x']
});

/** Put a fresh notebook in this test's folder and open it. */
export async function openNotebook(
  page: galata.IJupyterLabPageFixture,
  tmpPath: string
): Promise<string> {
  const file = `${tmpPath}/lab1.ipynb`;
  await page.contents.uploadContent(JSON.stringify(NOTEBOOK), 'text', file);
  await page.notebook.openByPath(file);
  await page.notebook.activate('lab1.ipynb');
  await kernelIdle(page);
  return file;
}

/**
 * Wait until the open notebook's kernel is idle: while it starts, the notebook takes the
 * focus back and closes a command palette opened meanwhile.
 */
export async function kernelIdle(page: Page): Promise<void> {
  await expect(
    page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').first()
  ).toBeVisible({ timeout: 60000 });
}

/**
 * Put a fresh notebook in this test's folder and open it through JupyterLab's
 * `docmanager:open` command, which needs no English label of the file browser
 * (Galata's file-browser helpers read some): for a page in another language.
 */
export async function openNotebookByCommand(
  page: galata.IJupyterLabPageFixture,
  tmpPath: string
): Promise<string> {
  const file = `${tmpPath}/lab1.ipynb`;
  await page.contents.uploadContent(JSON.stringify(NOTEBOOK), 'text', file);
  await page.evaluate(
    path =>
      (window as any).jupyterapp.commands.execute('docmanager:open', { path }),
    file
  );
  await expect(page.locator('.jp-NotebookPanel').first()).toBeVisible({
    timeout: 30000
  });
  await expect(page.locator('.jp-NotebookPanel .jp-Cell').first()).toBeVisible({
    timeout: 30000
  });
  await kernelIdle(page);
  return file;
}

/** The palette's search and the commands it must list first, in this order, in one language. */
export interface IPaletteWords {
  search: string;
  /** Open the panel, export the ledger, verify the ledger. */
  labels: [string, string, string];
}

export const ENGLISH_PALETTE: IPaletteWords = {
  search: 'Gradient check',
  labels: [
    'Gradient check: open panel',
    'Gradient check: export ledger',
    'Gradient check: verify ledger'
  ]
};

/**
 * Open the panel through its palette command, as a user would: search, check
 * that opening the panel is the first item (then export, then verify), and
 * run that first item.
 */
export async function openPanel(
  page: Page,
  words: IPaletteWords = ENGLISH_PALETTE
): Promise<Locator> {
  // The palette is opened by its command (Ctrl+Shift+C runs the same one): a shortcut pressed
  // while a freshly opened notebook is still taking focus can be lost. The modal palette also
  // closes when that notebook takes the focus: then it is opened and searched again.
  const input = page.locator('.lm-CommandPalette-input');
  const items = page.locator('.lm-CommandPalette-item');
  const labels = items.locator('.lm-CommandPalette-itemLabel');
  await expect(async () => {
    if (!(await input.isVisible())) {
      // Not awaited inside the page: the modal palette's command may settle only when it closes.
      await page.evaluate(() => {
        void (window as any).jupyterapp.commands.execute(
          'apputils:activate-command-palette'
        );
      });
    }
    await expect(input).toBeVisible({ timeout: 2000 });
    // Emptied first: filling in the text it already holds would not search again. Each step has
    // a short timeout, so a palette closed under it makes this attempt fail and the next retry.
    await input.fill('', { timeout: 2000 });
    await input.fill(words.search, { timeout: 2000 });
    await expect(labels.first()).toHaveText(words.labels[0], { timeout: 2000 });
    await expect(labels.nth(1)).toHaveText(words.labels[1], { timeout: 2000 });
    await expect(labels.nth(2)).toHaveText(words.labels[2], { timeout: 2000 });
    await items.first().click({ timeout: 2000 });
  }).toPass({ timeout: 60000 });
  const panel = page.locator('[data-testid="gradcheck-panel"]');
  await expect(panel).toBeVisible();
  return panel;
}

/** Fill the declare form and press Run. */
export async function declare(
  panel: Locator,
  fields: { function: string; inputs: string; analytical: string }
): Promise<void> {
  await panel.getByTestId('gradcheck-field-function').fill(fields.function);
  await panel.getByTestId('gradcheck-field-inputs').fill(fields.inputs);
  await panel
    .getByTestId('gradcheck-field-analytical-gradient')
    .fill(fields.analytical);
  await panel.getByTestId('gradcheck-run').click();
}

/**
 * Fill the declare form with its origin and destination notes as well, the text of each
 * field typed as a student types it, and press Run.
 */
export async function declareWithNotes(
  panel: Locator,
  fields: {
    function: string;
    inputs: string;
    analytical: string;
    origin: string;
    destination: string;
  }
): Promise<void> {
  await panel.getByTestId('gradcheck-field-origin').fill(fields.origin);
  await panel
    .getByTestId('gradcheck-field-destination')
    .fill(fields.destination);
  await declare(panel, fields);
}
