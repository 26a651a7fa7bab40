/**
 * The side panel in Spanish and in English, as JupyterLab's language setting
 * chooses: with the Spanish language pack installed and the translation
 * setting `locale: "es_ES"`, the palette, the panel's labels and buttons and a
 * failure's diagnosis are Spanish (from the extension's own catalog, which
 * jupyterlab_server merges into the language pack's); with `locale: "en"`
 * they are English. The codes in data attributes are English in both.
 *
 * The setting is given through Galata's settings mock, so the page loads in
 * that language from the start. Each run retakes the two screenshots that
 * docs/side-panel.md shows.
 */
import { expect, galata, test as base } from '@jupyterlab/galata';
import { Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import {
  IPaletteWords,
  SCREENSHOTS,
  declare,
  openNotebookByCommand,
  openPanel
} from './panelHelpers';

/** The words each language must show, written out here so a lost translation fails. */
interface ILanguage {
  locale: string;
  screenshot: string;
  palette: IPaletteWords;
  summary: string;
  run: string;
  buttons: [string, string, string];
  functionLabel: string;
  expectation: string;
  failed: string;
  diagnosis: string;
  chain: string;
  verified: string;
  verifyLine: string;
  settingsTitle: string;
  settingsField: string;
}

const LANGUAGES: ILanguage[] = [
  {
    locale: 'es_ES',
    screenshot: 'side-panel-es.png',
    palette: {
      search: 'Comprobación',
      labels: [
        'Comprobación de gradientes: abrir el panel',
        'Comprobación de gradientes: exportar el registro',
        'Comprobación de gradientes: verificar el registro'
      ]
    },
    summary: 'Declarar una comprobación',
    run: 'Ejecutar',
    buttons: ['Exportar', 'Verificar', 'Actualizar'],
    functionLabel: 'Función',
    expectation: 'Expectativa',
    failed: 'fallido',
    diagnosis: 'diagnóstico: error probable',
    chain: 'cadena correcta',
    verified: 'verificado',
    verifyLine: 'cadena correcta · vínculo correcto · 2 entradas',
    settingsTitle: 'Comprobación de gradientes',
    settingsField: 'dtype por defecto'
  },
  {
    locale: 'en',
    screenshot: 'side-panel-en.png',
    palette: {
      search: 'Gradient check',
      labels: [
        'Gradient check: open panel',
        'Gradient check: export ledger',
        'Gradient check: verify ledger'
      ]
    },
    summary: 'Declare a check',
    run: 'Run',
    buttons: ['Export', 'Verify', 'Refresh'],
    functionLabel: 'Function',
    expectation: 'Expectation',
    failed: 'failed',
    diagnosis: 'diagnosis: probable bug',
    chain: 'chain OK',
    verified: 'verified',
    verifyLine: 'chain OK · binding OK · 2 entries',
    settingsTitle: 'Gradient check',
    settingsField: 'Default dtype'
  }
];

/**
 * Galata waits for a tab named "Launcher" before each test; in Spanish it is "Lanzador".
 * Here the page is ready when the splash is gone and the launcher is shown, in any language.
 */
const test = base.extend({
  // eslint-disable-next-line no-empty-pattern -- Playwright reads a fixture's dependencies from this pattern; this one has none
  waitForApplication: async ({}, use) => {
    await use(async (page: Page) => {
      await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
      await page.locator('.jp-Launcher').first().waitFor({ state: 'visible' });
    });
  }
});

for (const language of LANGUAGES) {
  test.describe(`the side panel with locale ${language.locale}`, () => {
    test.use({
      autoGoto: true,
      mockSettings: {
        ...galata.DEFAULT_SETTINGS,
        '@jupyterlab/translation-extension:plugin': { locale: language.locale }
      }
    });

    test('shows its labels, buttons and a failure in that language', async ({
      page,
      tmpPath
    }) => {
      await openNotebookByCommand(page, tmpPath);

      // Given the panel opened from the palette, whose first match for the search opens it
      const panel = await openPanel(page, language.palette);

      // Then its sections, labels and buttons are in the language
      await expect(
        panel.locator('details.jp-gradcheck-section > summary').first()
      ).toHaveText(language.summary);
      await expect(
        panel.locator('label[for="jp-gradcheck-field-function"]')
      ).toHaveText(language.functionLabel);
      await expect(panel.getByTestId('gradcheck-run')).toHaveText(language.run);
      await expect(panel.getByTestId('gradcheck-export')).toHaveText(
        language.buttons[0]
      );
      await expect(panel.getByTestId('gradcheck-verify')).toHaveText(
        language.buttons[1]
      );
      await expect(panel.getByTestId('gradcheck-refresh')).toHaveText(
        language.buttons[2]
      );

      // When a wrong derivative is declared (3*x for x*x at 2) and run
      await declare(panel, {
        function: 'x*x',
        inputs: '{"x": 2}',
        analytical: '3*x'
      });

      // Then the failure is kept with its verdict and diagnosis in the language
      const card = panel.locator(
        '[data-testid="gradcheck-check"][data-status="failed"]'
      );
      await expect(card).toHaveCount(1, { timeout: 30000 });
      await expect(card.getByTestId('gradcheck-badge')).toHaveText(
        language.failed
      );
      await expect(card.locator('thead th').nth(1)).toHaveText(
        language.expectation
      );
      const diagnosis = card.getByTestId('gradcheck-diagnosis');
      await expect(diagnosis).toContainText(language.diagnosis);
      await expect(panel.getByTestId('gradcheck-chain-badge')).toHaveText(
        language.chain
      );
      // And the record's code stays English where tools read it
      await expect(diagnosis).toHaveAttribute('data-diagnosis', 'probable_bug');

      // When Verify is pressed (it saves the notebook, so its binding on disk is current)
      await panel.getByTestId('gradcheck-verify').click();
      // Then the report's verdict and lines are in the language
      const report = panel.getByTestId('gradcheck-verify-report');
      await expect(report).toHaveAttribute('data-ok', 'true', {
        timeout: 30000
      });
      await expect(report.getByTestId('gradcheck-badge')).toHaveText(
        language.verified
      );
      await expect(report).toContainText(language.verifyLine);

      // And the screenshot docs/side-panel.md shows is taken, the declare form folded
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.sidebar.setWidth(460, 'right');
      await panel
        .locator('details.jp-gradcheck-section > summary')
        .first()
        .click();
      await panel.evaluate(node => node.scrollTo(0, 0));
      await panel.screenshot({
        path: path.join(SCREENSHOTS, language.screenshot)
      });

      // And the Settings Editor shows the extension's settings in the language
      await page.evaluate(
        query =>
          (window as any).jupyterapp.commands.execute('settingeditor:open', {
            query
          }),
        language.palette.search
      );
      await expect(
        page.locator('.jp-PluginList-entry', {
          hasText: language.settingsTitle
        })
      ).toBeVisible();
      await expect(
        page
          .locator('.jp-SettingsPanel')
          .getByText(language.settingsField, { exact: true })
          .first()
      ).toBeVisible();
    });
  });
}
