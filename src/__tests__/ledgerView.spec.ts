/**
 * @jest-environment jsdom
 *
 * The check card, rendered into a DOM: the Expectation and Observation
 * columns, the kept failures and the history, as the UI tests find them.
 */
import { wholeNumbers } from '../dom';
import { groupByCheck } from '../grouping';
import { checkCard } from '../ledgerView';
import { ICheckRecord, ILedgerEntry } from '../types';
import { sixAgainstFour } from './fakes';

const SPEC: ICheckRecord = {
  id: 'x*x@b2',
  function: 'x*x',
  inputs: { x: 2 },
  dtype: 'float64',
  device: 'cpu',
  analytical_gradient: '3*x',
  tolerance: { rtol: 1e-7, atol: 1e-10 }
};

function completed(passed: boolean): ICheckRecord {
  return {
    ...SPEC,
    executed: true,
    passed,
    observed_gradient: 4,
    observations: {
      backward_pass_1: {
        gradients: {
          x: { value: 4, shape: [], dtype: 'float64', device: 'cpu' }
        }
      }
    },
    ...sixAgainstFour(passed, 'the difference is far above rounding')
  };
}

function entries(): ILedgerEntry[] {
  return [
    {
      seq: 1,
      kind: 'expectation',
      check_id: SPEC.id!,
      data: SPEC as ILedgerEntry['data']
    },
    {
      seq: 2,
      kind: 'observation',
      check_id: SPEC.id!,
      data: { expectation_seq: 1, passed: false, record: completed(false) }
    },
    {
      seq: 3,
      kind: 'tolerance_change',
      check_id: SPEC.id!,
      data: {
        target: 'tolerance',
        old: { rtol: 1e-7, atol: 1e-10 },
        new: { rtol: 0.5, atol: 1e-10 },
        justification: 'loose on purpose',
        widened: true,
        tightened: false,
        after_failure: true
      }
    }
  ];
}

function text(root: HTMLElement, testid: string): string[] {
  return Array.from(root.querySelectorAll(`[data-testid="${testid}"]`)).map(
    n => n.textContent ?? ''
  );
}

describe('checkCard', () => {
  const noop = {
    editTolerance: () => undefined,
    reviseExpectation: () => undefined
  };

  it('puts the declared expectation and the observed value in separate columns', () => {
    // Given a check declared as 3*x and observed as 4.0
    const card = checkCard(groupByCheck(entries())[0], noop);
    // Then the Expectation column shows 3*x as written and the Observation column 4.0 with its metadata
    expect(text(card, 'gradcheck-expectation-value')).toEqual(['3*x']);
    expect(text(card, 'gradcheck-observation-value')).toEqual(['4.0']);
    expect(text(card, 'gradcheck-observation-meta')).toEqual([
      'shape [] scalar · float64 · cpu'
    ]);
    const headers = Array.from(card.querySelectorAll('thead th')).map(
      n => n.textContent
    );
    expect(headers).toEqual(['input', 'Expectation', 'Observation']);
  });

  it('shows the failed verdict, the kept failure with its diagnosis, and the flagged history', () => {
    const card = checkCard(groupByCheck(entries())[0], noop);
    expect(card.dataset.status).toBe('failed');
    expect(text(card, 'gradcheck-badge')).toEqual(['failed']);
    expect(text(card, 'gradcheck-diagnosis')[0]).toContain(
      'diagnosis: probable bug'
    );
    expect(text(card, 'gradcheck-flag')).toEqual(['widened after failure']);
    expect(text(card, 'gradcheck-justification')).toEqual([
      '“loose on purpose”'
    ]);
    expect(text(card, 'gradcheck-tolerance')).toEqual(['rtol 0.5, atol 1e-10']);
  });

  it('says beside "passed" what a float32 pass could not see, and nothing for a failure', () => {
    // Given a float32 check that passed with a detection floor of 0.0024, and the same check failed
    const floor = {
      relative: 0.002436,
      input: 'x',
      index: [3],
      reason: 'in float32, a one-element error below 0.0024 could not be seen'
    };
    const observed = (passed: boolean): ILedgerEntry[] => [
      {
        seq: 1,
        kind: 'expectation',
        check_id: SPEC.id!,
        data: { ...SPEC, dtype: 'float32' } as ILedgerEntry['data']
      },
      {
        seq: 2,
        kind: 'observation',
        check_id: SPEC.id!,
        data: {
          expectation_seq: 1,
          passed,
          record: {
            ...completed(passed),
            dtype: 'float32',
            detection_floor: floor,
            float64_shadow: {
              status: 'observed',
              dtype: 'float64',
              passed,
              reason: 'the same check in float64 passed'
            }
          }
        }
      }
    ];
    // When each is drawn as a card
    const passedCard = checkCard(groupByCheck(observed(true))[0], noop);
    const failedCard = checkCard(groupByCheck(observed(false))[0], noop);
    // Then the passed card names the floor and its dtype, its reason as the title; the failed one shows none
    expect(text(passedCard, 'gradcheck-detection-floor')).toEqual([
      'blind below 0.0024 relative error (float32)'
    ]);
    expect(
      passedCard
        .querySelector('[data-testid="gradcheck-detection-floor"]')!
        .getAttribute('title')
    ).toBe(floor.reason);
    expect(text(failedCard, 'gradcheck-detection-floor')).toEqual([]);
    // and each card says what its float64 shadow saw
    expect(text(passedCard, 'gradcheck-float64-shadow')).toEqual([
      'float64 shadow passed'
    ]);
    expect(text(failedCard, 'gradcheck-float64-shadow')).toEqual([
      'float64 shadow failed'
    ]);
  });

  it('calls the edit action for its own check', () => {
    // Given a card whose tolerance button is clicked
    const seen: string[] = [];
    const card = checkCard(groupByCheck(entries())[0], {
      ...noop,
      editTolerance: view => seen.push(view.id)
    });
    (
      card.querySelector(
        '[data-testid="gradcheck-edit-tolerance"]'
      ) as HTMLButtonElement
    ).click();
    // Then the action receives that check
    expect(seen).toEqual(['x*x@b2']);
  });
});

describe('wholeNumbers', () => {
  it('keeps each number with an exponent in one unbreakable span, the rest as text', () => {
    // Given a comparison line with two errors written with exponents
    const parts = wholeNumbers(
      'max abs err 1.83e-11, max rel err 4.58e-12 — ok'
    );
    // Then the numbers are spans of their own and the words stay text, in order
    expect(
      parts.map(part =>
        typeof part === 'string' ? part : `[${part.textContent}]`
      )
    ).toEqual([
      'max abs err ',
      '[1.83e-11]',
      ', max rel err ',
      '[4.58e-12]',
      ' — ok'
    ]);
    expect((parts[1] as HTMLElement).className).toBe('jp-gradcheck-number');
  });
});
