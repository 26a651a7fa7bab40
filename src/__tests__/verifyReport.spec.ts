/**
 * Summaries of verify reports, in the shape core/verify.py answers.
 */
import { useTranslator } from '../i18n';
import { summariseVerify } from '../verifyReport';
import { spanish } from './spanishTranslator';
import { honestVerifyAnswer } from './fakes';

describe('summariseVerify', () => {
  it('reads an honest ledger as verified, with its flags kept visible', () => {
    // Given a verify answer for one notebook whose chain and binding hold, with a widening after failure
    const answer = honestVerifyAnswer('x*x@b2');
    // When summarised
    const summary = summariseVerify(answer);
    // Then it is ok, and the flag is still shown to the grader
    expect(summary.ok).toBe(true);
    expect(summary.lines).toEqual([
      { level: 'info', text: 'chain OK · binding OK · 5 entries' },
      { level: 'flag', text: 'x*x@b2: widened after failure (entries 5)' }
    ]);
  });

  it('names the line and the reason of each error', () => {
    // Given a truncated ledger against its binding
    const answer = {
      ok: false,
      reports: [
        {
          ok: false,
          chain_ok: true,
          binding_ok: false,
          entries: 3,
          errors: [
            {
              line: null,
              reason:
                'the ledger was truncated: the notebook binding records 5 entries',
              scope: 'binding'
            },
            { line: 2, reason: 'hash mismatch', scope: 'chain' }
          ],
          warnings: ['lab1.ipynb: something to know'],
          flags: []
        }
      ]
    };
    const summary = summariseVerify(answer);
    expect(summary.ok).toBe(false);
    expect(summary.lines.map(l => [l.level, l.text])).toEqual([
      ['info', 'chain OK · binding broken · 3 entries'],
      [
        'error',
        'the ledger was truncated: the notebook binding records 5 entries'
      ],
      ['error', 'line 2: hash mismatch'],
      ['warning', 'lab1.ipynb: something to know']
    ]);
  });

  it('reads a single report without the reports wrapper, and refuses a missing ok', () => {
    expect(summariseVerify({ chain_ok: true, errors: [] })).toEqual({
      ok: false,
      lines: [{ level: 'info', text: 'chain OK' }]
    });
  });

  it("shows the witness's flags in words, in English and in Spanish", () => {
    // Given a verify answer whose witness saw entries late, missed some and saw other ledgers
    const answer = {
      ok: true,
      chain_ok: true,
      binding_ok: true,
      entries: 4,
      errors: [],
      warnings: [],
      flags: [],
      witness: {
        witnessed: true,
        seen: 4,
        student: 'ana',
        flags: [
          { flag: 'witnessed_late', count: 2, reason: 'witnessed late: ...' },
          { flag: 'unwitnessed', count: 1, reason: 'unwitnessed: ...' },
          { flag: 'other_ledgers_witnessed', count: 1, reason: '...' }
        ]
      }
    };
    // Then each is a flag line naming it and its count
    const flags = (lines: { level: string; text: string }[]) =>
      lines.filter(line => line.level === 'flag').map(line => line.text);
    expect(flags(summariseVerify(answer).lines)).toEqual([
      'witness: witnessed late (2)',
      'witness: unwitnessed (1)',
      'witness: other ledgers witnessed (1)'
    ]);
    useTranslator(spanish());
    try {
      expect(flags(summariseVerify(answer).lines)).toEqual([
        'testigo: atestiguado con retraso (2)',
        'testigo: sin testigo (1)',
        'testigo: el testigo vio otros registros (1)'
      ]);
    } finally {
      useTranslator(null);
    }
  });
});
