/**
 * The notebook binding kept in `metadata.gradcheck`.
 */
import { IMetadataOwner, applyBinding, bindingFromLedger } from '../binding';
import { ILedgerEntry } from '../types';

function entries(n: number): ILedgerEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    seq: i + 1,
    kind: 'note',
    check_id: null,
    data: {},
    hash: `hash${i + 1}`
  }));
}

class FakeModel implements IMetadataOwner {
  metadata: { [key: string]: unknown } = {};
  writes = 0;
  getMetadata(key: string): unknown {
    return this.metadata[key];
  }
  setMetadata(key: string, value: unknown): void {
    this.writes += 1;
    this.metadata[key] = value;
  }
}

describe('bindingFromLedger', () => {
  it('names the ledger beside the notebook, its count and its head hash', () => {
    // Given the ledger answer for work/lab1.ipynb with three entries
    const answer = {
      ledger: { path: 'work/lab1.gradcheck.jsonl', entries: 3, head: 'hash3' },
      entries: entries(3)
    };
    // Then the binding names the file relative to the notebook (as core/binding.py does)
    expect(bindingFromLedger(answer)).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 3,
      head: 'hash3'
    });
  });

  it('takes the binding the server computed with the core, when the answer has one', () => {
    // Given a GET ledger answer whose binding.current came from core/binding.py
    const answer = {
      ledger: 'work/lab1.gradcheck.jsonl',
      entries: entries(3),
      binding: {
        recorded: null,
        current: { ledger: 'lab1.gradcheck.jsonl', entries: 3, head: 'h' }
      }
    };
    // Then that is the binding, as it is
    expect(bindingFromLedger(answer)).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 3,
      head: 'h'
    });
  });

  it('counts entries from seq 1, after the genesis entry, and keeps the ledger id the server gives', () => {
    // Given a ledger that opens with its genesis entry (seq 0) and holds seq 1 and 2
    const genesis = {
      seq: 0,
      kind: 'note',
      check_id: null,
      data: { event: 'genesis', ledger_id: 'id1' },
      hash: 'g'
    };
    const answer = {
      ledger: 'work/lab1.gradcheck.jsonl',
      entries: [genesis, ...entries(2)]
    };
    // Then the binding counts 2 entries, as verify does, ending at the last hash
    expect(bindingFromLedger(answer)).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'hash2'
    });
    // And a server binding's ledger id is kept, and a binding with another id is not the same one
    const withId = {
      ...answer,
      binding: {
        current: {
          ledger: 'lab1.gradcheck.jsonl',
          ledger_id: 'id1',
          entries: 2,
          head: 'hash2'
        }
      }
    };
    const bound = bindingFromLedger(withId);
    expect(bound).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      ledger_id: 'id1',
      entries: 2,
      head: 'hash2'
    });
    const model = new FakeModel();
    applyBinding(model, { ...bound!, ledger_id: 'id0' });
    expect(applyBinding(model, bound)).toBe(true);
  });

  it('reads the POST checks summary too', () => {
    expect(
      bindingFromLedger({
        path: 'lab1.gradcheck.jsonl',
        entries: 2,
        head: 'abc'
      })
    ).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'abc'
    });
  });

  it('binds nothing while the ledger is empty', () => {
    expect(
      bindingFromLedger({ ledger: 'lab1.gradcheck.jsonl', entries: [] })
    ).toBeNull();
  });
});

describe('applyBinding', () => {
  it('writes a changed binding and leaves an unchanged one alone', () => {
    // Given a notebook model with no binding
    const model = new FakeModel();
    const binding = { ledger: 'lab1.gradcheck.jsonl', entries: 2, head: 'abc' };
    // When the binding is applied twice
    expect(applyBinding(model, binding)).toBe(true);
    expect(applyBinding(model, { ...binding })).toBe(false);
    // Then the model was written once (an unchanged ledger does not dirty the notebook)
    expect(model.writes).toBe(1);
    expect(model.metadata.gradcheck).toEqual(binding);
    // And a new head is written
    expect(applyBinding(model, { ...binding, entries: 3, head: 'def' })).toBe(
      true
    );
    expect(model.metadata.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 3,
      head: 'def'
    });
  });
});
