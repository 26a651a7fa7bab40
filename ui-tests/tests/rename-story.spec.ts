/**
 * A notebook renamed on its first save keeps one ledger, in a real JupyterLab
 * and Chromium: a new notebook, a check from its kernel, the first save renamed
 * to lab1.ipynb, another check from the kernel and one from the side panel.
 * Then `jupyter gradcheck verify`, run by this test on the server's own files
 * as a grader runs it, calls lab1.ipynb OK with all six entries, the grader's
 * export names every check, and no red badge showed in the panel on the way.
 */
import { expect, test } from '@jupyterlab/galata';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { SCREENSHOTS, declare, kernelIdle, openPanel } from './panelHelpers';

/** Where jupyter_server_test_config.py notes the server root of this run. */
const SERVER_ROOT_NOTE = path.resolve(__dirname, '..', '.cache', 'server-root');

/** A cell that checks x*x at `x` from the kernel, under the check id `id`. */
function kernelCheck(id: string, x: number): string {
  return [
    'from jupyterlab_gradcheck import check',
    `check("x*x", "2*x", x=${x}, id="${id}")`
  ].join('\n');
}

/** `jupyter gradcheck ARGS` in `folder`: its standard output (it throws on a non-zero exit). */
function gradcheck(folder: string, ...args: string[]): string {
  return execFileSync('jupyter', ['gradcheck', ...args], {
    cwd: folder,
    encoding: 'utf-8',
    timeout: 120000
  });
}

// Tall enough that the panel's three cards are in the screenshot.
test.use({ autoGoto: true, viewport: { width: 1280, height: 2000 } });

test('a notebook renamed on its first save keeps one ledger, and verify names every check', async ({
  page,
  tmpPath
}) => {
  // Every red badge the panel's header ever shows is kept, so one that comes and goes is seen.
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as any).gradcheckRedBadges = seen;
    new MutationObserver(() => {
      document
        .querySelectorAll(
          '[data-testid="gradcheck-chain"] .jp-gradcheck-badge-failed'
        )
        .forEach(node => seen.push(node.textContent ?? ''));
    }).observe(document.body, {
      subtree: true,
      childList: true,
      characterData: true
    });
  });

  // Given a new notebook, Untitled.ipynb, and the side panel beside it
  const created = await page.notebook.createNew();
  expect(created).toBe('Untitled.ipynb');
  await kernelIdle(page);
  const panel = await openPanel(page);
  await expect(panel.getByTestId('gradcheck-notebook')).toHaveText(
    'Untitled.ipynb'
  );
  const cards = panel.getByTestId('gradcheck-check');

  // When its kernel checks x*x, before the notebook was ever saved
  await page.notebook.setCell(0, 'code', kernelCheck('before_rename', 3));
  await page.notebook.runCell(0);
  await expect(cards).toHaveCount(1, { timeout: 60000 });
  // Then the panel notes quietly that the binding is not saved yet: no red badge
  await expect(panel.getByTestId('gradcheck-binding-behind')).toBeVisible();

  // When the first save asks for a name and the student gives lab1.ipynb
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute('docmanager:save');
  });
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toBeVisible();
  await dialog.locator('input[type="text"]').fill('lab1.ipynb');
  await dialog.locator('.jp-mod-accept').click();
  await expect(dialog).toBeHidden();
  // Then the panel follows lab1.ipynb, and its ledger moved along: none is left under Untitled
  await expect(panel.getByTestId('gradcheck-notebook')).toHaveText(
    'lab1.ipynb'
  );
  await expect(cards).toHaveCount(1);
  expect(
    await page.contents.fileExists(`${tmpPath}/lab1.gradcheck.jsonl`)
  ).toBe(true);
  expect(
    await page.contents.fileExists(`${tmpPath}/Untitled.gradcheck.jsonl`)
  ).toBe(false);

  // When the same kernel (never restarted) checks again, and the panel checks x*x at 2
  await page.notebook.activate('lab1.ipynb');
  await page.notebook.addCell('code', kernelCheck('after_rename', 5));
  await page.notebook.runCell((await page.notebook.getCellCount()) - 1);
  await expect(cards).toHaveCount(2, { timeout: 60000 });
  await declare(panel, {
    function: 'x*x',
    inputs: '{"x": 2}',
    analytical: '4'
  });
  await expect(cards).toHaveCount(3, { timeout: 60000 });
  const panelCheck = await cards.first().getAttribute('data-check-id');
  // And the notebook is saved
  await page.notebook.save();
  await expect(panel.getByTestId('gradcheck-binding-behind')).toHaveCount(0, {
    timeout: 30000
  });
  // And the header counts the six entries verify counts below
  await expect(panel.getByTestId('gradcheck-chain')).toContainText(
    ' 6 entries'
  );
  await panel.screenshot({
    path: path.join(SCREENSHOTS, 'side-panel-renamed.png')
  });

  // Then no red badge appeared on the way
  expect(await page.evaluate(() => (window as any).gradcheckRedBadges)).toEqual(
    []
  );
  expect(
    await page.contents.fileExists(`${tmpPath}/Untitled.gradcheck.jsonl`)
  ).toBe(false);

  // And `jupyter gradcheck verify lab1.ipynb`, on the server's files, exits 0: one ledger of
  // six entries, the saved binding on its head
  const folder = path.join(
    fs.readFileSync(SERVER_ROOT_NOTE, 'utf-8').trim(),
    tmpPath
  );
  const report = JSON.parse(gradcheck(folder, 'verify', 'lab1.ipynb', '--json'))
    .reports[0];
  expect([report.ok, report.errors, report.entries]).toEqual([true, [], 6]);
  expect(report.binding.ok).toBe(true);
  expect(path.basename(report.ledger)).toBe('lab1.gradcheck.jsonl');
  // And its text report names every check: two from the kernel, one from the panel
  const lines = gradcheck(folder, 'verify', 'lab1.ipynb').split(/\r?\n/);
  expect(lines[0].startsWith('OK   lab1.ipynb: 6 entries')).toBe(true);
  expect(report.checks.slice().sort()).toEqual(
    ['after_rename', 'before_rename', panelCheck].sort()
  );
  expect(lines[1]).toBe(`  checks: ${report.checks.join(', ')}`);
});
