/**
 * A check of 1000 elements in a real JupyterLab and Chromium: the notebook's
 * kernel runs `check()` on sin(x) over 1000 points, the ledger keeps the
 * gradients in its blob store, and the side panel's card shows each stored
 * value by its summary. "Show values" loads the first page of the elements
 * from the server, and the card still fits the sidebar's 250 px.
 */
import { expect, test } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';
import * as path from 'path';

import { SCREENSHOTS, codeNotebook, kernelIdle, openPanel } from './panelHelpers';

/** sin(x) at 1000 points from -1 to 1 (x = -1 + 2k/999), its derivative declared as cos(x). */
const CELL = [
  'from jupyterlab_gradcheck import check\n',
  'x = [-1 + 2 * k / 999 for k in range(1000)]\n',
  'check("sum(sin(x))", "cos(x)", x=x, id="big_sin")'
];

/** What lies past the panel's edges, or a button whose label does not fit it. */
async function outside(panel: Locator, within: Locator): Promise<string[]> {
  const edge = await panel.boundingBox();
  return within.evaluateAll(
    (roots: HTMLElement[], box) => {
      const found: string[] = [];
      for (const root of roots) {
        for (const node of [root, ...root.querySelectorAll('*')]) {
          const rect = node.getBoundingClientRect();
          if (rect.width === 0 || rect.height === 0 || node.closest('.jp-gradcheck-stored-values') !== null) {
            continue; // the values scroll inside their own box
          }
          const what = `${node.tagName.toLowerCase()}[${(node as HTMLElement).dataset.testid ?? ''}]`;
          if (box && (rect.left < box.x - 1 || rect.right > box.x + box.width + 1)) {
            found.push(`past the panel edge: ${what}`);
          }
          if (node.tagName === 'BUTTON' && node.scrollWidth > node.clientWidth + 1) {
            found.push(`label outside its button: ${what}`);
          }
        }
      }
      return found;
    },
    edge
  );
}

test.use({ autoGoto: true, viewport: { width: 1280, height: 1400 } });

test('a 1000-element check shows its stored gradient by summary, and Show values loads the elements', async ({
  page,
  tmpPath
}) => {
  // Given a notebook whose cell checks sin(x) over 1000 points from its kernel
  const file = `${tmpPath}/lab1.ipynb`;
  await page.contents.uploadContent(JSON.stringify(codeNotebook(CELL)), 'text', file);
  await page.notebook.openByPath(file);
  await page.notebook.activate('lab1.ipynb');
  await kernelIdle(page);
  const panel = await openPanel(page);

  // When the cell runs
  await page.notebook.runCell(0);
  const card = panel.getByTestId('gradcheck-check');
  await expect(card).toHaveCount(1, { timeout: 60000 });

  // Then the Observation column holds the stored gradient: what it is and its summary,
  // cos(x) being smallest (cos 1 = 0.540302) at the ends and largest
  // (cos(1/999) = 0.9999995) at the two middle points
  const observed = card.locator('.jp-gradcheck-observation [data-testid="gradcheck-stored"]');
  await expect(observed).toHaveCount(1);
  await expect(observed.getByTestId('gradcheck-stored-kind')).toHaveText('float64 [1000], stored');
  await expect(observed.getByTestId('gradcheck-stored-summary')).toContainText('min 0.540302 · max 0.999999');
  await expect(observed.getByTestId('gradcheck-stored-head')).toContainText('first 8: 0.540302, ');
  const sha = (await observed.getAttribute('data-sha256')) ?? '';
  expect(sha).toMatch(/^[0-9a-f]{64}$/);
  await expect(observed.getByTestId('gradcheck-stored-sha')).toHaveAttribute('title', `sha256 ${sha}`);
  // and the Expectation / Observation table draws summaries, no list of 1000 elements
  const columns = card.getByTestId('gradcheck-columns');
  expect(((await columns.textContent()) ?? '').length).toBeLessThan(1000);

  // When Show values is pressed
  await observed.getByTestId('gradcheck-show-values').click();

  // Then the server's first page, all 1000 elements, is shown from cos(-1) on
  const values = observed.getByTestId('gradcheck-stored-values');
  await expect(values).toBeVisible();
  await expect(values).toContainText('0.540302, 0.541986');
  await expect(observed.getByTestId('gradcheck-stored-status')).toHaveText('values 1–1000 of 1000');
  await expect(observed.getByTestId('gradcheck-more-values')).toBeHidden();

  // At the sidebar's default 250 px, every stored value and its buttons stay inside the panel
  await page.sidebar.setWidth(250, 'right');
  await expect
    .poll(async () => Math.round((await panel.boundingBox())?.width ?? 0))
    .toBeLessThanOrEqual(252);
  const stored = panel.getByTestId('gradcheck-stored');
  expect(await outside(panel, stored)).toEqual([]);
  // the card's Expectation / Observation table, its values shown, for docs/side-panel.md
  await columns.screenshot({
    path: path.join(SCREENSHOTS, 'side-panel-stored.png')
  });
});
