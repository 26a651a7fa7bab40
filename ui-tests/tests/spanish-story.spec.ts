/**
 * A Spanish student's session, from JupyterLab's language setting (es_ES) to
 * the grader's HTML: the side panel runs a failing check, refuses an input,
 * widens a tolerance with a justification, verifies and exports HTML; the
 * inline panel runs a failing check in the kernel. At each step no visible
 * text may be an English message of the project's own catalogs. Then the
 * panel is laid out at 250 px (the sidebar's default) and at 400 px, and no
 * element may overflow it, no label its button, no number break in two.
 * Each run retakes the screenshots docs/side-panel.md and docs/widget.md show.
 */
import { expect, galata, test as base } from '@jupyterlab/galata';
import { Locator, Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import {
  SCREENSHOTS,
  codeNotebook,
  declare,
  openNotebookByCommand,
  openPanel
} from './panelHelpers';
import { englishFragments, englishIn } from './spanishCatalog';

const PALETTE = {
  search: 'Comprobación',
  labels: [
    'Comprobación de gradientes: abrir el panel',
    'Comprobación de gradientes: exportar el registro',
    'Comprobación de gradientes: verificar el registro'
  ] as [string, string, string]
};

const ENGLISH = englishFragments();

/** Galata waits for an English "Launcher" tab; a Spanish page is ready when its launcher shows. */
const test = base.extend({
  // eslint-disable-next-line no-empty-pattern -- Playwright reads a fixture's dependencies from this pattern; this one has none
  waitForApplication: async ({}, use) => {
    await use(async (page: Page) => {
      await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
      await page.locator('.jp-Launcher').first().waitFor({ state: 'visible' });
    });
  }
});

test.use({
  autoGoto: true,
  viewport: { width: 1280, height: 1400 },
  mockSettings: {
    ...galata.DEFAULT_SETTINGS,
    '@jupyterlab/translation-extension:plugin': { locale: 'es_ES' }
  }
});

/** Fail when `area` shows an English message of the catalogs. */
async function expectNoEnglish(area: Locator, where: string): Promise<void> {
  const text = await area.innerText();
  expect({ where, english: englishIn(text, ENGLISH) }).toEqual({
    where,
    english: []
  });
}

/**
 * What overflows at the panel's present width: an element past the panel's
 * edges (outside a scrolling box), a button whose label does not fit, a
 * control taller than its natural height, a number broken over two lines.
 */
async function layoutProblems(panel: Locator): Promise<string[]> {
  return panel.evaluate((root: HTMLElement) => {
    const problems: string[] = [];
    const edge = root.getBoundingClientRect();
    const name = (node: Element) =>
      `${node.tagName.toLowerCase()}.${[...node.classList].join('.')}[${
        (node as HTMLElement).dataset.testid ?? ''
      }] "${(node.textContent ?? '').trim().slice(0, 40)}"`;
    const scrolls = (node: Element | null): boolean => {
      for (let up = node?.parentElement; up && up !== root; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (['auto', 'scroll'].includes(style.overflowX) || up.tagName === 'DETAILS' && !(up as HTMLDetailsElement).open) {
          return true;
        }
      }
      return false;
    };
    for (const node of root.querySelectorAll('*')) {
      const box = node.getBoundingClientRect();
      if (box.width === 0 || box.height === 0 || scrolls(node)) {
        continue;
      }
      if (box.right > edge.right + 1 || box.left < edge.left - 1) {
        problems.push(`past the panel edge (${Math.round(box.left)}-${Math.round(box.right)} of ${Math.round(edge.left)}-${Math.round(edge.right)}): ${name(node)}`);
      }
      if (node.tagName === 'BUTTON') {
        const button = node as HTMLElement;
        if (button.scrollWidth > button.clientWidth + 1 || button.scrollHeight > button.clientHeight + 1) {
          problems.push(`label outside its button: ${name(node)}`);
        }
      }
      if (node.tagName === 'SELECT' && box.height > 36) {
        problems.push(`control taller than its natural height (${Math.round(box.height)} px): ${name(node)}`);
      }
    }
    for (const value of root.querySelectorAll(
      '.jp-gradcheck-value, .jp-gradcheck-comparisons li, .jp-gradcheck-meta'
    )) {
      const walker = document.createTreeWalker(value, NodeFilter.SHOW_TEXT);
      for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        for (const match of (text.textContent ?? '').matchAll(/(?<![\w-])-?\d[\d.]*(?:e[+-]\d+)?/g)) {
          const range = document.createRange();
          range.setStart(text, match.index ?? 0);
          range.setEnd(text, (match.index ?? 0) + match[0].length);
          const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
          if (lines.size > 1) {
            problems.push(`number broken over ${lines.size} lines: ${match[0]}`);
          }
        }
      }
    }
    return problems;
  });
}

test('a Spanish session: panel, inline widget, Verify, HTML, at 250 and 400 px', async ({
  page,
  tmpPath
}) => {
  test.setTimeout(240000);
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  expect(ENGLISH.length).toBeGreaterThan(300);
  await openNotebookByCommand(page, tmpPath);
  const panel = await openPanel(page, PALETTE);
  await expectNoEnglish(panel, 'the empty panel');

  // When a wrong derivative (3*x for x*x at 2) is declared and run
  await declare(panel, { function: 'x*x', inputs: '{"x": 2}', analytical: '3*x' });
  const wrong = panel.locator('[data-testid="gradcheck-check"][data-status="failed"]');
  await expect(wrong).toHaveCount(1, { timeout: 60000 });
  // Then the diagnosis, its reason included, is Spanish (the record stays English)
  await expect(wrong.getByTestId('gradcheck-diagnosis')).toContainText(
    'diagnóstico: error probable — la derivación a mano da 6 en x'
  );
  await expectNoEnglish(panel, 'after a failing check');

  // When a function outside the allowed list is run
  await declare(panel, { function: 'foo(x)', inputs: '{"x": 2}', analytical: '1' });
  // Then the server's refusal is Spanish, beside the field
  await expect(panel.getByTestId('gradcheck-error-function')).toContainText(
    "la función 'foo' no está en la lista de funciones permitidas",
    { timeout: 30000 }
  );
  await expectNoEnglish(panel, 'after a refused function');

  // When the failing check's tolerance is widened with a justification
  await wrong.getByTestId('gradcheck-edit-tolerance').click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toBeVisible();
  await dialog.getByTestId('gradcheck-dialog-rtol').fill('0.5');
  await dialog
    .getByTestId('gradcheck-dialog-justification')
    .fill('3*x era un desliz por 2*x; se amplía solo para ver cómo se marca');
  await expectNoEnglish(dialog, 'the tolerance dialog');
  await dialog.locator('.jp-Dialog-button.jp-mod-accept').click();
  await expect(dialog).toBeHidden();
  // Then the history flags it in Spanish
  await expect(wrong.getByTestId('gradcheck-flag')).toHaveText('ampliada tras un fallo');

  // When Verify is pressed
  await panel.getByTestId('gradcheck-verify').click();
  const report = panel.getByTestId('gradcheck-verify-report');
  await expect(report).toHaveAttribute('data-ok', 'true', { timeout: 30000 });
  // Then its lines are Spanish
  await expect(report).toContainText('cadena correcta · vínculo correcto');
  await expectNoEnglish(panel, 'after Verify');
  await panel.evaluate(node => node.scrollTo(0, 0));
  await panel.screenshot({ path: path.join(SCREENSHOTS, 'spanish-side-panel.png') });

  // When the ledger is exported as HTML
  await panel.getByTestId('gradcheck-export-format').selectOption('html');
  const downloading = page.waitForEvent('download');
  await panel.getByTestId('gradcheck-export').click();
  const html = fs.readFileSync(await (await downloading).path(), 'utf-8');
  // Then the report is Spanish, as `jupyter gradcheck --language es export` writes it
  expect(html).toContain('<html lang="es">');
  expect(html).toContain('Informe de comprobación de gradientes');

  // At the sidebar's default 250 px and at 400 px, nothing overflows
  for (const width of [250, 400]) {
    await page.sidebar.setWidth(width, 'right');
    await expect
      .poll(async () => Math.round((await panel.boundingBox())?.width ?? 0))
      .toBeLessThanOrEqual(width + 2);
    expect({ width, problems: await layoutProblems(panel) }).toEqual({ width, problems: [] });
    await panel.evaluate(node => node.scrollTo(0, 0));
    await panel.screenshot({ path: path.join(SCREENSHOTS, `side-panel-${width}.png`) });
  }

  // When the inline panel runs the same wrong derivative in the notebook's kernel
  // (the right sidebar closed by its command: Galata's helper reads the English menu)
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('application:toggle-right-area')
  );
  const file = `${tmpPath}/inline.ipynb`;
  await page.contents.uploadContent(
    JSON.stringify(
      codeNotebook([
        'from jupyterlab_gradcheck.widget import GradcheckPanel\n',
        'GradcheckPanel({"function": "x*x", "x": 2, "analytical_gradient": "3*x"})'
      ])
    ),
    'text',
    file
  );
  await page.evaluate(
    path => (window as any).jupyterapp.commands.execute('docmanager:open', { path }),
    file
  );
  await expect
    .poll(
      () =>
        page.evaluate(() => {
          const widget = (window as any).jupyterapp.shell.currentWidget;
          return widget?.context?.path?.endsWith('inline.ipynb')
            ? (widget.sessionContext?.session?.kernel?.status ?? null)
            : null;
        }),
      { timeout: 60000 }
    )
    .toBe('idle');
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('notebook:run-cell')
  );
  const inline = page.locator('.jp-gradcheck-inline');
  await expect(inline).toBeVisible({ timeout: 60000 });
  // Then it speaks JupyterLab's language, not the kernel's English locale
  const run = inline.getByRole('button', { name: 'Ejecutar la comprobación' });
  await expect(run).toBeVisible();
  // whose label is whole inside its button, not "Ejecutar la co…"
  expect(
    await run.evaluate(node => node.scrollWidth <= node.clientWidth + 1)
  ).toBe(true);
  await run.click();
  await expect(inline.locator('table.jp-gradcheck-expectation-observation')).toBeVisible({
    timeout: 60000
  });
  await expect(inline).toContainText('fallida: el fallo se conserva en el registro');
  await expect(inline).toContainText('la derivación a mano da 6 en x');
  await expect(inline).not.toContainText('3.666852862501036e-09');
  await expectNoEnglish(inline, 'the inline panel after a failing check');
  await inline.screenshot({ path: path.join(SCREENSHOTS, 'spanish-inline-widget.png') });
});
