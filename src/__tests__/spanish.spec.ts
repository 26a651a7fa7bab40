/**
 * @jest-environment jsdom
 *
 * The panel's words in Spanish through a translator that reads the shipped
 * catalog, the way JupyterLab's does once the es_ES language pack is chosen:
 * shown text is translated, codes in data attributes stay English, and the
 * palette puts opening the panel first in either language.
 */
import { formatDiagnosis } from '../format';
import { groupByCheck } from '../grouping';
import { trans, useTranslator } from '../i18n';
import { checkCard } from '../ledgerView';
import { translateSchema } from '../schemaTranslation';
import { PALETTE_RANKS } from '../tokens';
import { ICheckRecord, ILedgerEntry } from '../types';
import { summariseVerify } from '../verifyReport';
import { checkEntries, entry, sixAgainstFour } from './fakes';
import { spanish } from './spanishTranslator';

/** A check whose run failed with a diagnosis, then had its tolerance widened after the failure. */
function failedCheck(): ILedgerEntry[] {
  const [declared, observed] = checkEntries(1, 'x*x@b2', false);
  const record = observed.data.record as ICheckRecord;
  Object.assign(record, sixAgainstFour(false, 'off by 2'));
  const widened = {
    target: 'tolerance',
    old: { rtol: 1e-7 },
    new: { rtol: 0.5 },
    justification: 'on purpose',
    widened: true,
    after_failure: true
  };
  return [declared, observed, entry(3, 'tolerance_change', 'x*x@b2', widened)];
}

function texts(root: HTMLElement, testid: string): string[] {
  return Array.from(root.querySelectorAll(`[data-testid="${testid}"]`)).map(
    n => n.textContent ?? ''
  );
}

afterEach(() => useTranslator(null));

describe('the panel in Spanish', () => {
  it('shows a failure, its diagnosis and its flag in Spanish, with the codes kept in data attributes', () => {
    // Given the Spanish translator
    useTranslator(spanish());
    // When a failed check with a flagged widening is rendered
    const card = checkCard(groupByCheck(failedCheck())[0], {
      editTolerance: () => undefined,
      reviseExpectation: () => undefined
    });
    // Then its words are Spanish
    expect(texts(card, 'gradcheck-badge')).toEqual(['fallido']);
    expect(texts(card, 'gradcheck-diagnosis')[0]).toContain(
      'diagnóstico: error probable'
    );
    expect(texts(card, 'gradcheck-flag')).toEqual(['ampliada tras un fallo']);
    expect(
      Array.from(card.querySelectorAll('thead th')).map(n => n.textContent)
    ).toEqual(['entrada', 'Expectativa', 'Observación']);
    expect(texts(card, 'gradcheck-edit-tolerance')).toEqual([
      'Editar la tolerancia…'
    ]);
    // And the record's codes stay English where tests and tools read them
    const diagnosis = card.querySelector(
      '[data-testid="gradcheck-diagnosis"]'
    ) as HTMLElement;
    expect(diagnosis.dataset.diagnosis).toBe('probable_bug');
    expect(
      (card.querySelector('[data-testid="gradcheck-flag"]') as HTMLElement)
        .dataset.flag
    ).toBe('widened after failure');
    expect(card.dataset.status).toBe('failed');
  });

  it('names every diagnosis code of the engine in Spanish, and an unknown code as its words', () => {
    useTranslator(spanish());
    expect(
      [
        'probable_bug',
        'precision_limited',
        'kink',
        'nondeterministic',
        'failed_to_run'
      ].map(formatDiagnosis)
    ).toEqual([
      'error probable',
      'limitado por la precisión',
      'punto anguloso',
      'no determinista',
      'no se pudo ejecutar'
    ]);
    expect(formatDiagnosis('some_new_code')).toBe('some new code');
  });

  it('counts entries with the plural form of the language', () => {
    useTranslator(spanish());
    const one = summariseVerify({
      ok: true,
      chain_ok: true,
      binding_ok: true,
      entries: 1
    });
    const five = summariseVerify({
      ok: true,
      chain_ok: true,
      binding_ok: false,
      entries: 5
    });
    expect(one.lines[0].text).toBe(
      'cadena correcta · vínculo correcto · 1 entrada'
    );
    expect(five.lines[0].text).toBe(
      'cadena correcta · vínculo roto · 5 entradas'
    );
  });

  it("translates the settings schema's titles and descriptions and leaves its values alone", () => {
    // Given the schema in Spanish
    useTranslator(spanish());
    const schema = {
      title: 'Gradient check',
      type: 'object',
      properties: {
        dtype: {
          title: 'Default dtype',
          enum: ['float64', 'float32'],
          default: 'float64'
        }
      }
    };
    const translated = translateSchema(schema);
    // Then the shown strings are Spanish and the rest is as written
    expect(translated.title).toBe('Comprobación de gradientes');
    expect(translated.properties.dtype).toEqual({
      title: 'dtype por defecto',
      enum: ['float64', 'float32'],
      default: 'float64'
    });
    expect(schema.title).toBe('Gradient check');
  });
});

describe('the panel in English', () => {
  it('shows the English text, with placeholders filled, when no translator is given', () => {
    // Given no translator (the jest default, and nullTranslator in JupyterLab)
    useTranslator(null);
    // Then the English msgid is the text
    expect(
      trans.__('diagnosis: %1', formatDiagnosis('precision_limited'))
    ).toBe('diagnosis: precision limited');
    expect(trans._n('%1 entry', '%1 entries', 1)).toBe('1 entry');
    expect(trans._n('%1 entry', '%1 entries', 3)).toBe('3 entries');
  });
});

describe('the palette', () => {
  it('ranks opening the panel before exporting and verifying, in any language', () => {
    // The palette sorts equal matches by rank before label: the ranks alone decide
    expect(PALETTE_RANKS.open).toBeLessThan(PALETTE_RANKS.export);
    expect(PALETTE_RANKS.open).toBeLessThan(PALETTE_RANKS.verify);
  });
});
