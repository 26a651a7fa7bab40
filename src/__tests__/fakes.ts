/**
 * Fakes at the model's edge: a requester whose every REST call is a jest
 * mock, a notebook whose metadata is a plain object, and ledger answers in
 * the shape `GET ledger` gives them. Not a spec: helpers for the specs.
 */
import { IMetadataOwner } from '../binding';
import { GradcheckRequestError, IGradcheckRequester } from '../requester';
import { IActiveNotebook } from '../tokens';
import {
  ICheckRecord,
  ILedgerAnswer,
  ILedgerEntry,
  IServerStatus
} from '../types';
import { IFormValues } from '../validation';

export const STATUS: IServerStatus = {
  version: '0.1.0',
  devices: [
    { id: 'cpu', available: true },
    { id: 'cuda', available: false, reason: 'no CUDA device' }
  ],
  error: null
};

type R = IGradcheckRequester;

/** A jest mock typed as one of the requester's calls. */
function call<K extends keyof R>(impl: R[K]): jest.MockedFunction<R[K]> {
  return jest.fn(
    impl as (...args: unknown[]) => unknown
  ) as unknown as jest.MockedFunction<R[K]>;
}

/** Every REST call as a jest mock; by default the server answers an empty ledger. */
export function fakeRequester(): jest.Mocked<IGradcheckRequester> {
  return {
    getStatus: call<'getStatus'>(async () => STATUS),
    getLedger: call<'getLedger'>(async notebook => ledgerAnswer(notebook, [])),
    getLedgerBlob: call<'getLedgerBlob'>(
      async (_notebook, sha, offset = 0) => ({
        sha256: sha,
        shape: [3],
        dtype: 'float64',
        values: [1, 2, 3].slice(offset),
        offset,
        total: 3
      })
    ),
    runCheck: call<'runCheck'>(async () => ({
      record: {},
      ledger: { path: 'lab1.gradcheck.jsonl', entries: 2, head: 'h2' }
    })),
    changeTolerance: call<'changeTolerance'>(async () => ({
      entry: entry(3, 'tolerance_change', 'x*x@b1', {})
    })),
    changeExpectation: call<'changeExpectation'>(async () => ({
      entry: entry(3, 'expectation_change', 'x*x@b1', {})
    })),
    verifyLedger: call<'verifyLedger'>(async () => ({
      ok: true,
      reports: [
        {
          ok: true,
          chain_ok: true,
          binding_ok: true,
          entries: 2,
          errors: [],
          warnings: [],
          flags: []
        }
      ]
    })),
    exportLedger: call<'exportLedger'>(
      async () => new Blob(['student,assignment\n'], { type: 'text/csv' })
    )
  };
}

/** A notebook model's metadata, counting writes. */
export class FakeMetadata implements IMetadataOwner {
  values: { [key: string]: unknown } = {};
  writes = 0;
  getMetadata(key: string): unknown {
    return this.values[key];
  }
  setMetadata(key: string, value: unknown): void {
    this.writes += 1;
    this.values[key] = value;
  }
}

/** An open notebook: its path can be renamed, it can be dirty, saving is recorded. */
export class FakeNotebook implements IActiveNotebook {
  constructor(public path: string) {}
  metadata: FakeMetadata | null = new FakeMetadata();
  dirty = false;
  save = jest.fn(async () => {
    this.dirty = false;
  });
}

export function entry(
  seq: number,
  kind: string,
  checkId: string | null,
  data: { [key: string]: unknown }
): ILedgerEntry {
  return {
    seq,
    kind,
    check_id: checkId,
    data,
    hash: `hash${seq}`,
    time: '2025-01-02T03:04:05Z'
  };
}

const SPEC: ICheckRecord = {
  id: 'x*x@b1',
  function: 'x*x',
  inputs: { x: 3 },
  dtype: 'float64',
  device: 'cpu',
  analytical_gradient: 6
};

/** An expectation and its observation, for check `id`. */
export function checkEntries(
  first: number,
  id: string,
  passed: boolean
): ILedgerEntry[] {
  const spec = { ...SPEC, id };
  return [
    entry(first, 'expectation', id, { record: spec }),
    entry(first + 1, 'observation', id, {
      expectation_seq: first,
      passed,
      record: {
        ...spec,
        executed: true,
        passed,
        observed_gradient: passed ? 6 : 4
      }
    })
  ];
}

/** A `GET ledger` answer for a notebook, with a chain verdict. */
export function ledgerAnswer(
  notebook: string,
  entries: ILedgerEntry[],
  chainOk = true
): ILedgerAnswer {
  const ledger = notebook.replace(/\.ipynb$/, '.gradcheck.jsonl');
  return {
    ledger: {
      path: ledger,
      entries: entries.length,
      head: entries.length ? (entries[entries.length - 1].hash ?? null) : null
    },
    entries,
    chain: { ok: chainOk, chain_ok: chainOk, binding_ok: null }
  };
}

/**
 * A verify answer, as `POST ledger/verify` gives it, for one notebook whose
 * chain and binding hold: five entries, the fifth a widening after failure of
 * `checkId`.
 */
export function honestVerifyAnswer(checkId: string): {
  [key: string]: unknown;
} {
  return {
    ok: true,
    reports: [
      {
        ok: true,
        chain_ok: true,
        binding_ok: true,
        entries: 5,
        errors: [],
        warnings: [],
        flags: [{ check_id: checkId, flag: 'widened_after_failure', seqs: [5] }]
      }
    ]
  };
}

/**
 * The comparison of x*x at 2 declared as 3*x (6 against the observed 4), and,
 * when it fails, its failure diagnosed a probable bug for `reason`.
 */
export function sixAgainstFour(
  passed: boolean,
  reason: string
): Pick<ICheckRecord, 'comparisons' | 'failure'> {
  return {
    comparisons: [
      {
        name: 'analytical_vs_backward_pass_1',
        input: 'x',
        max_abs_err: 2,
        max_rel_err: 0.5,
        passed
      }
    ],
    failure: passed
      ? null
      : {
          comparison: 'analytical_vs_backward_pass_1',
          input: 'x',
          left: 6,
          right: 4,
          abs_err: 2,
          diagnosis: 'probable_bug',
          reason
        }
  };
}

/** The server's refusal of a function that names an unknown y: HTTP 400, on the function field. */
export function unknownNameRefusal(): GradcheckRequestError {
  return new GradcheckRequestError(
    400,
    'invalid_function',
    "unknown name 'y'",
    'function'
  );
}

/** The declare form as a user fills it for x*x at 3 with the expectation 6. */
export function formValues(overrides: Partial<IFormValues> = {}): IFormValues {
  return {
    function: 'x*x',
    inputs: '{"x": 3}',
    analytical_gradient: '6',
    dtype: 'float64',
    device: 'cpu',
    'finite_difference.scheme': 'central',
    'finite_difference.step': '',
    'tolerance.rtol': '',
    'tolerance.atol': '',
    origin: 'd(x*x)/dx = 2x',
    destination: 'x.grad',
    ...overrides
  };
}

/** The check record that `formValues()` builds: what the server receives for it. */
export function builtSquare(
  overrides: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    function: 'x*x',
    inputs: { x: 3 },
    analytical_gradient: 6,
    dtype: 'float64',
    device: 'cpu',
    finite_difference: { scheme: 'central', step: null },
    origin: 'd(x*x)/dx = 2x',
    destination: 'x.grad',
    ...overrides
  };
}

/** A promise with its resolve, to hold an answer until the test releases it. */
export function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Wait (a macrotask at a time, at most 50) until a condition holds. */
export async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !condition(); i++) {
    await new Promise(resolve => setTimeout(resolve, 0));
  }
  if (!condition()) {
    throw new Error('the condition never held');
  }
}
