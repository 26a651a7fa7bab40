/**
 * Stored values as the ledger view receives them: a 1000-element check of
 * sin(x) whose input, expectation and gradient are kept by their hashes, and
 * the pages `GET ledger/blob` answers for a 5-element tensor.
 */
import { entry } from './fakes';
import { IBlobPage, ICheckRecord, IStoredValue } from '../types';

export const X_SHA = 'a'.repeat(63) + '1';
export const GRAD_SHA = 'b'.repeat(63) + '2';
export const EXPECTED_SHA = 'c'.repeat(63) + '3';

/** A stored float64 vector of 1000 elements, as the record keeps it. */
export function stored(sha: string, min: number, max: number): IStoredValue {
  return {
    stored: { sha256: sha, shape: [1000], dtype: 'float64', bytes: 8080 },
    summary: {
      min,
      max,
      mean: 0.841467973,
      norm: 26.96887099413618,
      nonfinite: 0,
      head: [
        min,
        0.5403191353480681,
        0.54033596,
        0.540352,
        0.5404,
        0.5405,
        0.5406,
        0.5407
      ]
    }
  };
}

/** A 1000-element check of sin(x) whose input, expectation and gradients are stored. */
export function bigRecord(): ICheckRecord {
  const gradient = {
    value: stored(GRAD_SHA, 0.5403023058681398, 0.99999999995),
    shape: [1000],
    dtype: 'float64',
    device: 'cpu'
  };
  const record = {
    id: 'big_sin',
    function: 'sum(sin(x))',
    inputs: { x: stored(X_SHA, -1, 1) },
    dtype: 'float64',
    device: 'cpu',
    analytical_gradient: stored(EXPECTED_SHA, 0.54, 1),
    tolerance: { rtol: 1e-7, atol: 1e-10 },
    executed: true,
    passed: true,
    observed_gradient: gradient.value,
    observations: { backward_pass_1: { gradients: { x: gradient } } }
  };
  return record as unknown as ICheckRecord;
}

export function bigEntries() {
  const record = bigRecord();
  return [
    entry(1, 'expectation', 'big_sin', { ...record, executed: false }),
    entry(2, 'observation', 'big_sin', {
      expectation_seq: 1,
      passed: true,
      record
    })
  ];
}

/** Pages of a 5-element tensor, 3 elements at a time, as GET ledger/blob answers them. */
export function pagesOfFive(sha: string, offset: number): IBlobPage {
  const all = [0.1, 0.2, 0.30000000000000004, 0.4, 0.5];
  return {
    sha256: sha,
    shape: [5],
    dtype: 'float64',
    values: all.slice(offset, offset + 3),
    offset,
    total: 5
  };
}
