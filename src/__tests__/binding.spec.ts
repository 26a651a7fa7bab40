/**
 * The notebook binding kept in `metadata.gradcheck`.
 */
import {
  IMetadataOwner,
  applyBinding,
  bindingFromLedger,
  bindingState,
  followRename
} from '../binding';
import { ILedgerAnswer, ILedgerEntry } from '../types';

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

describe('bindingState', () => {
  const current = {
    ledger: 'lab1.gradcheck.jsonl',
    ledger_id: 'a1',
    entries: 4,
    head: 'hash4'
  };
  function answer(
    chain: ILedgerAnswer['chain'],
    recorded: unknown
  ): ILedgerAnswer {
    return {
      ledger: 'work/lab1.gradcheck.jsonl',
      entries: entries(4),
      chain,
      binding: { recorded, current }
    };
  }

  it('is broken only when verify fails on the binding', () => {
    // Given a ledger truncated under the saved binding: verify's ok and binding_ok are false
    const truncated = answer(
      { ok: false, chain_ok: true, binding_ok: false },
      { ...current, entries: 5, head: 'hash5' }
    );
    // Then the header calls it broken
    expect(bindingState(truncated)).toBe('broken');
  });

  it('is behind, not broken, for a notebook never saved since a kernel check', () => {
    // Given the state after a check in a fresh notebook: verify says OK with a warning
    // (binding_ok false: nothing saved to compare yet), and the saved notebook binds nothing
    const fresh = answer({ ok: true, chain_ok: true, binding_ok: false }, null);
    // Then it is only behind
    expect(bindingState(fresh)).toBe('behind');
  });

  it('is behind when the saved binding is older than the ledger, and current once saved', () => {
    const older = { ...current, entries: 2, head: 'hash2' };
    expect(
      bindingState(
        answer({ ok: true, chain_ok: true, binding_ok: true }, older)
      )
    ).toBe('behind');
    expect(
      bindingState(
        answer({ ok: true, chain_ok: true, binding_ok: true }, { ...current })
      )
    ).toBe('current');
  });

  it('says nothing without a verify report', () => {
    expect(bindingState(answer(null, null))).toBeNull();
  });
});

describe('followRename', () => {
  it("names the moved ledger in the model's binding at once, keeping the rest", () => {
    // Given Untitled.ipynb bound to its ledger
    const model = new FakeModel();
    model.metadata.gradcheck = {
      ledger: 'Untitled.gradcheck.jsonl',
      ledger_id: 'a1',
      entries: 2,
      head: 'hash2'
    };
    // When it is renamed to work/lab1.ipynb
    expect(followRename(model, 'work/lab1.ipynb')).toBe(true);
    // Then the binding names lab1.gradcheck.jsonl, with the same id, count and head
    expect(model.metadata.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      ledger_id: 'a1',
      entries: 2,
      head: 'hash2'
    });
    // And a second notice of the same path writes nothing
    expect(followRename(model, 'work/lab1.ipynb')).toBe(false);
    expect(model.writes).toBe(1);
  });

  it('leaves a notebook without a binding alone', () => {
    const model = new FakeModel();
    expect(followRename(model, 'lab1.ipynb')).toBe(false);
    expect(model.writes).toBe(0);
  });
});
