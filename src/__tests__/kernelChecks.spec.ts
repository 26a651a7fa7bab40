/**
 * Checks run in the kernel (`check()` or the inline panel) display an
 * attestation; the extension then reloads the ledger and binds the notebook
 * through its model, since the kernel never writes the notebook file.
 */
import { Signal } from '@lumino/signaling';

import {
  ATTESTATION_MIME,
  IKernelMessageLike,
  carriesAttestation,
  watchKernelChecks
} from '../activeNotebook';
import { GradcheckModel } from '../model';
import {
  FakeNotebook,
  checkEntries,
  fakeRequester,
  ledgerAnswer
} from './fakes';

function message(
  kind: string,
  data: { [mime: string]: unknown } | null
): IKernelMessageLike {
  return {
    header: { msg_type: kind },
    content: data === null ? {} : { data, metadata: {} }
  };
}

const ATTESTED = message('display_data', {
  [ATTESTATION_MIME]: {
    ledger_id: 'id1',
    ledger: 'lab1.gradcheck.jsonl',
    check_id: 'x*x@b1',
    seq: 2,
    hash: 'hash2'
  },
  'text/plain': 'gradcheck: x*x@b1 recorded at seq 2'
});

function setup(active: boolean) {
  const requester = fakeRequester();
  const model = new GradcheckModel(requester);
  const notebook = new FakeNotebook('work/lab1.ipynb');
  model.setNotebook(notebook);
  const answer = ledgerAnswer(
    'work/lab1.ipynb',
    checkEntries(1, 'x*x@b1', true)
  );
  answer.binding = {
    current: {
      ledger: 'lab1.gradcheck.jsonl',
      ledger_id: 'id1',
      entries: 2,
      head: 'hash2'
    }
  };
  requester.getLedger.mockResolvedValue(answer);
  const iopubMessage = new Signal<unknown, IKernelMessageLike>({});
  const stop = watchKernelChecks(
    { sessionContext: { iopubMessage } },
    () => active,
    model
  );
  return { requester, model, notebook, iopubMessage, stop };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Promise.resolve();
  }
}

describe('carriesAttestation', () => {
  it('reads display_data, execute_result and update_display_data, and nothing else', () => {
    // Given messages of each kind, with and without the attestation
    // Then only the displays that hold the attestation count
    expect(carriesAttestation(ATTESTED)).toBe(true);
    expect(
      carriesAttestation({
        ...ATTESTED,
        header: { msg_type: 'execute_result' }
      })
    ).toBe(true);
    expect(
      carriesAttestation({ ...ATTESTED, header: { msg_type: 'stream' } })
    ).toBe(false);
    expect(
      carriesAttestation(
        message('display_data', { 'text/html': '<table></table>' })
      )
    ).toBe(false);
    expect(carriesAttestation(message('display_data', null))).toBe(false);
  });
});

describe('watchKernelChecks', () => {
  it('reloads the ledger and writes the new head into the active notebook', async () => {
    // Given the active notebook, unbound, whose kernel ran a check
    const { requester, notebook, iopubMessage } = setup(true);
    // When the check's attestation arrives on the kernel's iopub channel
    iopubMessage.emit(ATTESTED);
    await settle();
    // Then the ledger was read again and the binding, with the ledger id, is in the notebook model
    expect(requester.getLedger).toHaveBeenCalledWith('work/lab1.ipynb');
    expect(notebook.metadata?.values.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      ledger_id: 'id1',
      entries: 2,
      head: 'hash2'
    });
  });

  it('ignores other messages, other notebooks, and everything after it stops', async () => {
    // Given a watcher on a notebook that is not the active one, and one on the active notebook
    const inactive = setup(false);
    const stopped = setup(true);
    stopped.stop();
    // When an attestation arrives on each, and a plain display on the active one
    inactive.iopubMessage.emit(ATTESTED);
    stopped.iopubMessage.emit(ATTESTED);
    stopped.iopubMessage.emit(
      message('display_data', { 'text/plain': 'hello' })
    );
    await settle();
    // Then no ledger was read and no metadata written
    expect(inactive.requester.getLedger).not.toHaveBeenCalled();
    expect(stopped.requester.getLedger).not.toHaveBeenCalled();
    expect(inactive.notebook.metadata?.writes).toBe(0);
  });
});
