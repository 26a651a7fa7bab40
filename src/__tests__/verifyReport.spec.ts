/**
 * Summaries of verify reports, in the shape core/verify.py answers.
 */
import { summariseVerify } from '../verifyReport';
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
});
