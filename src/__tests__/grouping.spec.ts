/**
 * Grouping ledger entries by check. The entries have the shapes
 * core/ledger.py writes (docs/contracts.md, "The ledger").
 */
import { groupByCheck, historyFlags, toleranceDirection } from '../grouping';
import { ICheckRecord, ILedgerEntry } from '../types';

const SEED: ICheckRecord = {
  id: 'x*x@a1',
  function: 'x*x',
  inputs: { x: 3 },
  dtype: 'float64',
  device: 'cpu',
  analytical_gradient: 6,
  tolerance: { rtol: 1e-7, atol: 1e-10 },
  finite_difference: { scheme: 'central', step: null, rtol: 1e-5, atol: 1e-8 }
};
const WRONG = {
  ...SEED,
  id: 'x*x@b2',
  inputs: { x: 2 },
  analytical_gradient: '3*x'
};

function observation(spec: ICheckRecord, passed: boolean, value: number) {
  return {
    ...spec,
    executed: true,
    passed,
    observed_gradient: value,
    failure: passed
      ? null
      : {
          comparison: 'analytical_vs_backward_pass_1',
          input: 'x',
          diagnosis: 'probable_bug',
          reason: 'off by 2'
        }
  };
}

let seq = 0;
function entry(
  kind: string,
  checkId: string | null | undefined,
  data: object
): ILedgerEntry {
  seq += 1;
  return {
    seq,
    time: `2025-01-01T00:00:0${seq}+00:00`,
    kind,
    check_id: checkId ?? null,
    data: data as ILedgerEntry['data'],
    prev: 'p',
    hash: `h${seq}`
  };
}

function ledger(): ILedgerEntry[] {
  seq = 0;
  return [
    entry('expectation', SEED.id, SEED),
    entry('observation', SEED.id, {
      expectation_seq: 1,
      passed: true,
      record: observation(SEED, true, 6)
    }),
    entry('expectation', WRONG.id, WRONG),
    entry('observation', WRONG.id, {
      expectation_seq: 3,
      passed: false,
      record: observation(WRONG, false, 4)
    }),
    entry('tolerance_change', WRONG.id, {
      target: 'tolerance',
      old: { rtol: 1e-7, atol: 1e-10 },
      new: { rtol: 0.5, atol: 1e-10 },
      justification: 'the exercise asks for a loose bound',
      widened: true,
      tightened: false,
      after_failure: true
    }),
    entry('note', null, { text: 'about the ledger' }),
    entry('observation', WRONG.id, {
      expectation_seq: 3,
      passed: true,
      record: observation(WRONG, true, 4)
    }),
    entry('expectation_change', WRONG.id, {
      old: '3*x',
      new: '2*x',
      justification: 'power rule',
      after_observation: true,
      via: 'change'
    })
  ];
}

describe('groupByCheck', () => {
  it('makes one view per check in order of first appearance, skipping notes', () => {
    // Given a ledger of two checks and a note
    const views = groupByCheck(ledger());
    // Then there are two views, the seed first
    expect(views.map(v => v.id)).toEqual([SEED.id, WRONG.id]);
  });

  it('keeps a failure after a later run passed', () => {
    // Given the wrong check failed, then passed after a widening
    const wrong = groupByCheck(ledger())[1];
    // Then its latest status is passed, yet the failed run (seq 4) is kept with its diagnosis
    expect(wrong.status).toBe('passed');
    expect(wrong.runs.map(r => r.seq)).toEqual([4, 7]);
    expect(wrong.failuresKept.map(r => r.seq)).toEqual([4]);
    expect(wrong.failuresKept[0].record.failure?.diagnosis).toBe(
      'probable_bug'
    );
  });

  it('tracks the tolerance and expectation now in force, and the history with flags', () => {
    const wrong = groupByCheck(ledger())[1];
    expect(wrong.tolerance).toEqual({ rtol: 0.5, atol: 1e-10 });
    expect(wrong.fdTolerance).toEqual({ rtol: 1e-5, atol: 1e-8 });
    expect(wrong.analytical).toBe('2*x');
    expect(wrong.declared?.analytical_gradient).toBe('3*x');
    expect(wrong.history.map(h => [h.kind, h.flags, h.justification])).toEqual([
      [
        'tolerance',
        ['widened after failure'],
        'the exercise asks for a loose bound'
      ],
      ['expectation', ['revised after observation'], 'power rule']
    ]);
  });

  it('sorts by seq, whatever order the entries arrive in', () => {
    const views = groupByCheck(ledger().reverse());
    expect(views[1].runs.map(r => r.seq)).toEqual([4, 7]);
    expect(views[1].analytical).toBe('2*x');
  });

  it('shows a check that failed to run as such, and keeps it', () => {
    // Given a run that crashed (recorded by record_failed_to_run)
    seq = 0;
    const entries = [
      entry('expectation', SEED.id, SEED),
      entry('observation', SEED.id, {
        expectation_seq: 1,
        failed_to_run: true,
        passed: false,
        reason: 'worker timed out after 30 s',
        record: SEED
      })
    ];
    const [view] = groupByCheck(entries);
    // Then it is neither passed nor failed, the reason is kept
    expect(view.status).toBe('failed_to_run');
    expect(view.latest?.failedToRun).toBe('worker timed out after 30 s');
    expect(view.failuresKept).toHaveLength(1);
  });

  it('says not run for an expectation with no observation yet', () => {
    seq = 0;
    const [view] = groupByCheck([entry('expectation', SEED.id, SEED)]);
    expect(view.status).toBe('not_run');
    expect(view.latest).toBeNull();
    expect(view.analytical).toBe(6);
  });
});

describe('tolerance flags', () => {
  it('takes the direction the writer recorded', () => {
    expect(toleranceDirection({ widened: true, tightened: false })).toBe(
      'widened'
    );
    expect(toleranceDirection({ widened: false, tightened: true })).toBe(
      'tightened'
    );
    expect(toleranceDirection({ widened: true, tightened: true })).toBe(
      'mixed'
    );
  });

  it('compares old and new when the entry does not say', () => {
    expect(
      toleranceDirection({
        old: { rtol: 1, atol: 1 },
        new: { rtol: 2, atol: 1 }
      })
    ).toBe('widened');
    expect(
      toleranceDirection({
        old: { rtol: 1, atol: 1 },
        new: { rtol: 1, atol: 0.5 }
      })
    ).toBe('tightened');
  });

  it('flags a tightening after a failure differently from a widening', () => {
    expect(
      historyFlags('tolerance_change', {
        widened: false,
        tightened: true,
        after_failure: true
      })
    ).toEqual(['after failure']);
    expect(
      historyFlags('tolerance_change', {
        widened: true,
        tightened: false,
        after_failure: false
      })
    ).toEqual(['widened']);
    expect(
      historyFlags('expectation_change', { after_observation: false })
    ).toEqual([]);
  });
});
