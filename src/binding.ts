/**
 * The notebook binding: `metadata.gradcheck` names the notebook's ledger,
 * its entry count and its head hash, so a swapped or truncated ledger is
 * detectable by `verify`. The panel keeps it current in the notebook model,
 * and it is saved with the notebook like any other metadata.
 */
import { ILedgerAnswer, ILedgerSummary } from './types';

/** The value stored under `metadata.gradcheck`. */
export interface IBinding {
  ledger: string;
  /** The random id of the ledger's genesis entry (absent for a ledger without one). */
  ledger_id?: string | null;
  entries: number;
  head: string | null;
}

/** The metadata key of the binding. */
export const BINDING_KEY = 'gradcheck';

/** The last path segment: the ledger sits beside its notebook. */
export function basename(path: string): string {
  const parts = path.split('/');
  return parts[parts.length - 1];
}

/**
 * The binding a ledger answer (from `GET ledger` or `POST checks`) implies,
 * or null when the ledger has no entries yet (nothing to bind).
 */
export function bindingFromLedger(
  answer: ILedgerAnswer | ILedgerSummary
): IBinding | null {
  const current = 'binding' in answer ? answer.binding?.current : undefined;
  if (isBinding(current)) {
    // The server computed it with the core's binding_for: take it as it is.
    if (current.entries <= 0) {
      return null;
    }
    const bound: IBinding = {
      ledger: current.ledger,
      entries: current.entries,
      head: current.head
    };
    if (typeof current.ledger_id === 'string') {
      bound.ledger_id = current.ledger_id;
    }
    return bound;
  }
  let path = '';
  let entries = 0;
  let head: string | null = null;
  if ('ledger' in answer) {
    const ledger = answer.ledger;
    if (typeof ledger === 'string') {
      path = ledger;
    } else if (ledger) {
      path = ledger.path;
      entries = ledger.entries;
      head = ledger.head;
    }
    if (Array.isArray(answer.entries)) {
      // entries count from seq 1; a genesis entry (seq 0) names the ledger and is not counted
      const last = answer.entries[answer.entries.length - 1];
      entries = last ? last.seq : 0;
      head = last ? (last.hash ?? null) : null;
    } else if (typeof answer.entries === 'number') {
      entries = answer.entries;
      head = answer.head ?? head;
    }
  } else {
    path = answer.ledger ?? answer.path;
    entries = answer.entries;
    head = answer.head;
  }
  if (!path || entries === 0) {
    return null;
  }
  return { ledger: basename(path), entries, head };
}

function isBinding(value: unknown): value is IBinding {
  if (!value || typeof value !== 'object') {
    return false;
  }
  const candidate = value as Partial<IBinding>;
  return (
    typeof candidate.ledger === 'string' &&
    typeof candidate.entries === 'number'
  );
}

/** The part of a notebook model the binding needs. */
export interface IMetadataOwner {
  getMetadata(key: string): unknown;
  setMetadata(key: string, value: unknown): void;
}

/** Whether two bindings name the same ledger state. */
export function sameBinding(a: unknown, b: IBinding): boolean {
  if (!a || typeof a !== 'object') {
    return false;
  }
  const other = a as Partial<IBinding>;
  return (
    other.ledger === b.ledger &&
    other.entries === b.entries &&
    other.head === b.head &&
    (other.ledger_id ?? null) === (b.ledger_id ?? null)
  );
}

/**
 * Write the binding into the notebook model when it differs, so an unchanged
 * ledger does not mark the notebook dirty. Returns whether it wrote.
 */
export function applyBinding(
  model: IMetadataOwner,
  binding: IBinding | null
): boolean {
  if (!binding || sameBinding(model.getMetadata(BINDING_KEY), binding)) {
    return false;
  }
  model.setMetadata(BINDING_KEY, { ...binding });
  return true;
}

/**
 * How the saved notebook's binding stands, judged as `jupyter gradcheck verify`
 * judges it: `broken` only when verify would fail on it (the ledger lost or
 * changed a bound entry, or the notebook binds another ledger); `behind` when
 * the ledger holds entries the saved notebook does not bind yet (a check made
 * since the last save, which saving writes), which verify calls OK with a
 * warning; `current` otherwise; null without a verify report.
 */
export type BindingState = 'broken' | 'behind' | 'current';

export function bindingState(answer: ILedgerAnswer): BindingState | null {
  const chain = answer.chain;
  if (!chain) {
    return null;
  }
  if (chain.binding_ok === false && chain.ok === false) {
    return 'broken';
  }
  const current = answer.binding?.current;
  if (
    isBinding(current) &&
    current.entries > 0 &&
    !sameBinding(answer.binding?.recorded, current)
  ) {
    return 'behind';
  }
  return 'current';
}

/** The ledger file that sits beside a notebook: `lab1.ipynb` -> `lab1.gradcheck.jsonl`. */
export function ledgerNameFor(notebookPath: string): string {
  return basename(notebookPath).replace(/\.ipynb$/, '') + '.gradcheck.jsonl';
}

/**
 * After the notebook was renamed (the server moved its ledger along): the
 * binding in the notebook model names the moved ledger. Done at once, before
 * the save that follows a first-save rename writes the model. Returns whether
 * it wrote.
 */
export function followRename(model: IMetadataOwner, newPath: string): boolean {
  const bound = model.getMetadata(BINDING_KEY);
  if (!bound || typeof bound !== 'object') {
    return false;
  }
  const binding = bound as Partial<IBinding>;
  const ledger = ledgerNameFor(newPath);
  if (
    typeof binding.ledger !== 'string' ||
    binding.ledger === ledger ||
    !binding.ledger.endsWith('.gradcheck.jsonl')
  ) {
    return false;
  }
  model.setMetadata(BINDING_KEY, { ...binding, ledger });
  return true;
}
