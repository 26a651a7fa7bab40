/**
 * Turns the ledger's flat list of entries into one view per check: what was
 * expected, every run, the failures that are kept, and the history of
 * tolerance and expectation changes. Pure, so it is tested without a browser.
 *
 * Nothing is dropped: a failed run stays in `failuresKept` even after a later
 * run passed, because a kept failure is evidence the grader must see.
 */
import { ICheckRecord, ILedgerEntry, ITolerance, JSONValue } from './types';
import { shownText, trans } from './i18n';

/** One run of a check, as its observation entry recorded it. */
export interface IRunView {
  seq: number;
  time?: string;
  /** The expectation entry this observation answers. */
  expectationSeq: number | null;
  record: ICheckRecord;
  /** true / false for a completed run, null when it failed to run. */
  passed: boolean | null;
  /** Why the run could not complete, when it could not. */
  failedToRun: string | null;
}

/** One tolerance or expectation change, with its justification and flags. */
export interface IHistoryItem {
  seq: number;
  time?: string;
  kind: 'tolerance' | 'expectation';
  /** `tolerance` or `finite_difference` for tolerance changes. */
  target: string;
  before: JSONValue | ITolerance | undefined;
  after: JSONValue | ITolerance | undefined;
  justification: string;
  flags: string[];
}

/** Everything the panel shows about one check. */
export interface ICheckView {
  id: string;
  /** The declaration as first written (the expectation entry's record). */
  declared: ICheckRecord | null;
  /** The expectation now in force: the declared one or its latest revision. */
  analytical: JSONValue | undefined;
  tolerance: ITolerance | undefined;
  fdTolerance: ITolerance | undefined;
  runs: IRunView[];
  latest: IRunView | null;
  status: 'passed' | 'failed' | 'not_run' | 'failed_to_run';
  failuresKept: IRunView[];
  history: IHistoryItem[];
}

type Data = { [key: string]: unknown };

function asRecord(value: unknown): ICheckRecord | null {
  return value && typeof value === 'object' && !Array.isArray(value)
    ? (value as ICheckRecord)
    : null;
}

/** The record an observation or expectation entry carries. */
function recordOf(data: Data): ICheckRecord {
  return (
    asRecord(data.record) ??
    asRecord(data.spec) ??
    asRecord(data.check) ??
    (data as ICheckRecord)
  );
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' ? value : null;
}

function pickTolerance(value: unknown): ITolerance | undefined {
  const record = asRecord(value);
  if (!record) {
    return undefined;
  }
  const tolerance: ITolerance = {};
  if ('rtol' in record) {
    tolerance.rtol = numberOrNull(record.rtol);
  }
  if ('atol' in record) {
    tolerance.atol = numberOrNull(record.atol);
  }
  return tolerance;
}

/**
 * Whether a tolerance change widened or tightened, taken from the entry when
 * it says so, else from comparing old and new.
 */
export function toleranceDirection(data: Data): string | null {
  if (
    typeof data.widened === 'boolean' ||
    typeof data.tightened === 'boolean'
  ) {
    const widened = data.widened === true;
    const tightened = data.tightened === true;
    if (widened && tightened) {
      return 'mixed';
    }
    return widened ? 'widened' : tightened ? 'tightened' : null;
  }
  const before = pickTolerance(data.old) ?? {};
  const after = pickTolerance(data.new) ?? {};
  let wider = false;
  let tighter = false;
  for (const key of ['rtol', 'atol'] as const) {
    const a = before[key];
    const b = after[key];
    if (typeof a === 'number' && typeof b === 'number') {
      wider = wider || b > a;
      tighter = tighter || b < a;
    }
  }
  if (wider && tighter) {
    return 'mixed';
  }
  return wider ? 'widened' : tighter ? 'tightened' : null;
}

/** The flags shown beside a history item. */
export function historyFlags(kind: string, data: Data): string[] {
  const flags: string[] = [];
  if (kind === 'tolerance_change') {
    const direction = toleranceDirection(data);
    if (data.after_failure === true) {
      flags.push(
        direction === 'widened' ? 'widened after failure' : 'after failure'
      );
    } else if (direction) {
      flags.push(direction);
    }
  } else if (kind === 'expectation_change' && data.after_observation === true) {
    flags.push('revised after observation');
  }
  return flags;
}

function newView(id: string): ICheckView {
  return {
    id,
    declared: null,
    analytical: undefined,
    tolerance: undefined,
    fdTolerance: undefined,
    runs: [],
    latest: null,
    status: 'not_run',
    failuresKept: [],
    history: []
  };
}

function applyExpectation(view: ICheckView, data: Data): void {
  const record = recordOf(data);
  if (!view.declared) {
    view.declared = record;
  }
  view.analytical = record.analytical_gradient;
  view.tolerance = pickTolerance(record.tolerance) ?? view.tolerance;
  view.fdTolerance =
    pickTolerance(record.finite_difference) ?? view.fdTolerance;
}

function applyObservation(view: ICheckView, entry: ILedgerEntry): void {
  const data = entry.data;
  const record = recordOf(data);
  const failedToRun = data.failed_to_run === true;
  const passed = typeof data.passed === 'boolean' ? data.passed : record.passed;
  const run: IRunView = {
    seq: entry.seq,
    time: entry.time,
    expectationSeq:
      numberOrNull(data.expectation_seq) ??
      numberOrNull(record.expectation_seq),
    record,
    passed: failedToRun || typeof passed !== 'boolean' ? null : passed,
    failedToRun: failedToRun
      ? typeof data.reason === 'string'
        ? shownText(data.reason)
        : trans.__('the run did not complete')
      : null
  };
  if (!view.declared) {
    view.declared = record;
    view.analytical = record.analytical_gradient;
  }
  view.runs.push(run);
  if (run.passed === false || run.failedToRun) {
    view.failuresKept.push(run);
  }
}

function applyChange(view: ICheckView, entry: ILedgerEntry): void {
  const data = entry.data;
  const isTolerance = entry.kind === 'tolerance_change';
  const item: IHistoryItem = {
    seq: entry.seq,
    time: entry.time,
    kind: isTolerance ? 'tolerance' : 'expectation',
    target:
      typeof data.target === 'string'
        ? data.target
        : isTolerance
          ? 'tolerance'
          : 'analytical_gradient',
    before: (isTolerance ? pickTolerance(data.old) : data.old) as JSONValue,
    after: (isTolerance
      ? pickTolerance(data.new)
      : (data.new ?? data.analytical_gradient)) as JSONValue,
    justification:
      typeof data.justification === 'string' ? data.justification : '',
    flags: historyFlags(entry.kind, data)
  };
  view.history.push(item);
  if (isTolerance) {
    const merged = {
      ...(item.target === 'finite_difference'
        ? view.fdTolerance
        : view.tolerance),
      ...(item.after as ITolerance)
    };
    if (item.target === 'finite_difference') {
      view.fdTolerance = merged;
    } else {
      view.tolerance = merged;
    }
  } else if (item.after !== undefined) {
    view.analytical = item.after as JSONValue;
  }
}

/**
 * Group ledger entries by check, in the order each check first appears.
 * Entries without a check (notes about the ledger itself) are skipped.
 */
export function groupByCheck(entries: ILedgerEntry[]): ICheckView[] {
  const views = new Map<string, ICheckView>();
  const ordered = [...entries].sort((a, b) => a.seq - b.seq);
  for (const entry of ordered) {
    if (!entry.check_id) {
      continue;
    }
    let view = views.get(entry.check_id);
    if (!view) {
      view = newView(entry.check_id);
      views.set(entry.check_id, view);
    }
    switch (entry.kind) {
      case 'expectation':
        applyExpectation(view, entry.data);
        break;
      case 'observation':
        applyObservation(view, entry);
        break;
      case 'tolerance_change':
      case 'expectation_change':
        applyChange(view, entry);
        break;
      default:
        break;
    }
  }
  for (const view of views.values()) {
    view.latest = view.runs.length ? view.runs[view.runs.length - 1] : null;
    if (!view.latest) {
      view.status = 'not_run';
    } else if (view.latest.passed === null) {
      view.status = 'failed_to_run';
    } else {
      view.status = view.latest.passed ? 'passed' : 'failed';
    }
  }
  return [...views.values()];
}
