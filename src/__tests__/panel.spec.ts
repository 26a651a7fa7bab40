/**
 * @jest-environment jsdom
 *
 * The panel rendering a real model whose requester is fake: the elements
 * and test ids the UI tests (ui-tests/tests/side-panel.spec.ts) look for,
 * in each state the model can be in. JupyterLab's dialogs and icon are
 * replaced, since they need a running application.
 */
import './jsdomPolyfills';

import { editToleranceDialog } from '../dialogs';
import { GradcheckModel } from '../model';
import { GradcheckPanel } from '../panel';
import { GradcheckRequestError } from '../requester';
import { FALLBACK_DEFAULTS } from '../settings';
import { Widget } from '@lumino/widgets';

import {
  FakeNotebook,
  checkEntries,
  entry,
  fakeRequester,
  honestVerifyAnswer,
  unknownNameRefusal,
  ledgerAnswer,
  until
} from './fakes';
import { GRAD_SHA, bigEntries } from './storedFixtures';

jest.mock('@jupyterlab/apputils', () => ({
  showErrorMessage: jest.fn(async () => undefined)
}));
jest.mock('../icon', () => ({ gradcheckIcon: undefined }));
jest.mock('../dialogs', () => ({
  editToleranceDialog: jest.fn(async () => false),
  reviseExpectationDialog: jest.fn(async () => false)
}));

const panels: GradcheckPanel[] = [];

afterEach(() => {
  for (const panel of panels.splice(0)) {
    panel.dispose();
  }
});

function setup(path: string | null = 'work/lab1.ipynb') {
  const requester = fakeRequester();
  const model = new GradcheckModel(requester);
  const notebook = path ? new FakeNotebook(path) : null;
  model.setNotebook(notebook);
  const panel = new GradcheckPanel(model);
  // Attached, as in the shell: a form submits only while it is in the document
  Widget.attach(panel, document.body);
  panels.push(panel);
  const byId = (testid: string) =>
    panel.node.querySelector(`[data-testid="${testid}"]`) as HTMLElement;
  const all = (testid: string) =>
    Array.from(
      panel.node.querySelectorAll(`[data-testid="${testid}"]`)
    ) as HTMLElement[];
  const fill = (testid: string, value: string) => {
    (byId(testid) as HTMLInputElement).value = value;
  };
  return { requester, model, notebook, panel, byId, all, fill };
}

describe('GradcheckPanel', () => {
  it('names a missing server extension and the command that enables it, hiding the form', async () => {
    // Given a server that answers the gradcheck routes with 404
    const { requester, model, byId } = setup();
    requester.getStatus.mockRejectedValueOnce(
      new GradcheckRequestError(404, 'not_found', 'HTTP 404', null)
    );
    // When the panel reloads
    await model.refresh();
    // Then it says so, with the fix, and hides the declare form
    const problem = byId('gradcheck-server-problem');
    expect(problem.hidden).toBe(false);
    expect(problem.textContent).toContain(
      'The server extension is not installed or not enabled.'
    );
    expect(problem.textContent).toContain('(HTTP 404)');
    expect(byId('gradcheck-fix-command').textContent).toBe(
      'jupyter server extension enable jupyterlab_gradcheck'
    );
    expect(panelBody(byId).hidden).toBe(true);
    // When Try again finds the extension enabled
    byId('gradcheck-retry').click();
    await until(() => model.status !== null && !model.loading);
    // Then the problem is gone and the form is back
    expect(problem.hidden).toBe(true);
    expect(panelBody(byId).hidden).toBe(false);
  });

  it('shows the notebook, the chain and one card per check, the newest first', async () => {
    const { requester, model, byId, all } = setup();
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', [
        entry(0, 'note', null, { event: 'genesis' }),
        ...checkEntries(1, 'x*x@b1', true),
        ...checkEntries(3, 'x*x@b2', false)
      ])
    );
    await model.refresh();
    expect(byId('gradcheck-notebook').textContent).toBe('lab1.ipynb');
    expect(byId('gradcheck-notebook').title).toBe('work/lab1.ipynb');
    expect(byId('gradcheck-chain-badge').textContent).toBe('chain OK');
    // counted from seq 1, as verify counts them: the genesis entry is not one
    expect(byId('gradcheck-chain').textContent).toContain(' 4 entries');
    expect(
      all('gradcheck-check').map(card => [
        card.dataset.checkId,
        card.dataset.status
      ])
    ).toEqual([
      ['x*x@b2', 'failed'],
      ['x*x@b1', 'passed']
    ]);
  });

  it('notes quietly a binding only behind the ledger, and shows red only one verify fails on', async () => {
    // Given a kernel check in a notebook not saved since: verify says OK with a warning
    const { requester, model, byId } = setup();
    const fresh = ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'sq', true));
    fresh.chain = { ok: true, chain_ok: true, binding_ok: false };
    fresh.binding = {
      recorded: null,
      current: { ledger: 'lab1.gradcheck.jsonl', entries: 2, head: 'h2' }
    };
    requester.getLedger.mockResolvedValue(fresh);
    await model.refresh();
    // Then the header has a quiet note and no red badge
    const header = byId('gradcheck-chain');
    expect(byId('gradcheck-binding-behind').textContent).toBe(
      ' binding not saved yet'
    );
    expect(header.querySelector('.jp-gradcheck-badge-failed')).toBeNull();
    // When the ledger lost an entry the saved notebook binds: verify fails on the binding
    const truncated = ledgerAnswer(
      'work/lab1.ipynb',
      checkEntries(1, 'sq', true)
    );
    truncated.chain = { ok: false, chain_ok: true, binding_ok: false };
    requester.getLedger.mockResolvedValue(truncated);
    await model.refresh();
    // Then the header says so in red
    expect(
      byId('gradcheck-chain').querySelector('.jp-gradcheck-badge-failed')
        ?.textContent
    ).toBe('binding broken');
  });

  it('says when there is no notebook, and when its ledger is empty or unreadable', async () => {
    const none = setup(null);
    await none.model.refresh();
    expect(none.byId('gradcheck-notebook').textContent).toBe('no notebook');
    expect(none.byId('gradcheck-no-notebook').textContent).toBe(
      'Open a notebook to see and declare its gradient checks.'
    );

    const empty = setup();
    await empty.model.refresh();
    expect(empty.byId('gradcheck-empty').textContent).toBe(
      'No checks yet. Write the expectation first, then run.'
    );
    expect(empty.byId('gradcheck-chain').textContent).toContain('empty ledger');

    const broken = setup();
    broken.requester.getLedger.mockRejectedValueOnce(
      new Error('line 3 is not JSON')
    );
    await broken.model.refresh();
    expect(broken.byId('gradcheck-checks').textContent).toBe(
      'Could not read the ledger: line 3 is not JSON'
    );
  });

  it('lists the server devices, disabling an absent one with its reason as its title and no note', async () => {
    // Given a CPU-only server and a student who never asked for another device
    const { model, byId } = setup();
    // When the panel reads the server's devices
    await model.refresh();
    // Then cuda is listed disabled, its reason in its title, and no note is shown
    const device = byId('gradcheck-field-device') as HTMLSelectElement;
    expect(device.value).toBe('cpu');
    expect(Array.from(device.options).map(o => [o.value, o.disabled])).toEqual([
      ['cpu', false],
      ['cuda', true]
    ]);
    expect(device.options[1].title).toBe('no CUDA device');
    expect(byId('gradcheck-device-notes').textContent).toBe('');
  });

  it('notes why the device asked for is absent', async () => {
    // Given settings that ask for cuda, on a CPU-only server
    const { model, byId } = setup();
    model.setDefaults({ ...FALLBACK_DEFAULTS, device: 'cuda' });
    // When the panel reads the server's devices
    await model.refresh();
    // Then the note says why cuda is disabled, and cpu is the usable choice
    expect(byId('gradcheck-device-notes').textContent).toBe(
      'cuda is disabled: no CUDA device'
    );
    expect((byId('gradcheck-field-device') as HTMLSelectElement).value).toBe(
      'cpu'
    );
  });

  it("applies the settings' defaults when they change, not on every reload", async () => {
    // Given settings that default to float32, and the server's answer
    const { model, byId } = setup();
    model.setDefaults({ ...FALLBACK_DEFAULTS, dtype: 'float32', rtol: 1e-4 });
    const dtype = byId('gradcheck-field-dtype') as HTMLSelectElement;
    expect(dtype.value).toBe('float32');
    expect(
      (byId('gradcheck-field-tolerance-rtol') as HTMLInputElement).value
    ).toBe('0.0001');
    await model.refresh();
    expect(dtype.value).toBe('float32');
    // When the user picks float16 and the panel reloads twice
    dtype.value = 'float16';
    await model.refresh();
    await model.refresh();
    // Then the user's choice stays
    expect(dtype.value).toBe('float16');
    // And new settings apply again
    model.setDefaults({ ...FALLBACK_DEFAULTS, dtype: 'bfloat16' });
    expect(dtype.value).toBe('bfloat16');
  });

  it('runs the declared check, shows its card and binds the notebook', async () => {
    // Given the seed check typed into the form
    const { requester, model, notebook, byId, all, fill } = setup();
    await model.refresh();
    requester.runCheck.mockImplementationOnce(async () => {
      requester.getLedger.mockResolvedValue(
        ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b1', true))
      );
      return {
        record: {},
        ledger: { path: 'work/lab1.gradcheck.jsonl', entries: 2, head: 'hash2' }
      };
    });
    fill('gradcheck-field-function', 'x*x');
    fill('gradcheck-field-inputs', '{"x": 3}');
    fill('gradcheck-field-analytical-gradient', '6');
    // When Run is pressed
    byId('gradcheck-run').click();
    // Then Run is disabled while it runs, and the card appears once it ran
    expect((byId('gradcheck-run') as HTMLButtonElement).disabled).toBe(true);
    expect(byId('gradcheck-run').textContent).toBe('Running…');
    await until(() => all('gradcheck-check').length === 1);
    expect(requester.runCheck.mock.calls[0][1]).toMatchObject({
      function: 'x*x',
      inputs: { x: 3 },
      analytical_gradient: 6
    });
    expect(byId('gradcheck-run').textContent).toBe('Run');
    expect(all('gradcheck-expectation-value').map(n => n.textContent)).toEqual([
      '6'
    ]);
    expect(notebook!.metadata!.values.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'hash2'
    });
  });

  it('shows errors beside their fields, and keeps a server error across the reload after it', async () => {
    const { requester, model, byId, fill } = setup();
    await model.refresh();
    // When the inputs are not JSON, the message is beside the inputs and nothing is sent
    fill('gradcheck-field-inputs', '{"x": }');
    byId('gradcheck-run').click();
    await until(() => byId('gradcheck-error-inputs').textContent !== '');
    expect(byId('gradcheck-error-inputs').textContent).toContain(
      'not valid JSON'
    );
    expect(
      byId('gradcheck-field-inputs').classList.contains('jp-mod-error-field')
    ).toBe(true);
    expect(requester.runCheck).not.toHaveBeenCalled();
    // When the server refuses the function
    requester.runCheck.mockRejectedValueOnce(unknownNameRefusal());
    fill('gradcheck-field-function', 'x*y');
    fill('gradcheck-field-inputs', '{"x": 3}');
    fill('gradcheck-field-analytical-gradient', '6');
    byId('gradcheck-run').click();
    await until(
      () => requester.getLedger.mock.calls.length === 2 && !model.loading
    );
    // Then its message is beside the function field, and the inputs error is gone
    expect(byId('gradcheck-error-function').textContent).toBe(
      "unknown name 'y'"
    );
    expect(byId('gradcheck-error-inputs').textContent).toBe('');
  });

  it('shows the verify report with its verdict and lines', async () => {
    const { requester, model, byId } = setup();
    requester.verifyLedger.mockResolvedValueOnce(honestVerifyAnswer('c'));
    byId('gradcheck-verify').click();
    expect(byId('gradcheck-verify-result').textContent).toBe('Verifying…');
    await until(() => model.verification.state === 'done' && !model.loading);
    const report = byId('gradcheck-verify-report');
    expect(report.dataset.ok).toBe('true');
    expect(report.textContent).toContain('chain OK · binding OK · 5 entries');
    expect(report.textContent).toContain(
      'c: widened after failure (entries 5)'
    );
  });

  it('downloads the export in the chosen format under the notebook name', async () => {
    const { requester, byId } = setup();
    const created = jest.fn((_blob: Blob) => 'blob:export');
    Object.assign(URL, {
      createObjectURL: created,
      revokeObjectURL: jest.fn()
    });
    const clicked: string[] = [];
    const click = jest
      .spyOn(HTMLAnchorElement.prototype, 'click')
      .mockImplementation(function (this: HTMLAnchorElement) {
        clicked.push(this.download);
      });
    (byId('gradcheck-export-format') as HTMLSelectElement).value = 'html';
    byId('gradcheck-export').click();
    await until(() => clicked.length === 1);
    expect(requester.exportLedger).toHaveBeenCalledWith(
      'work/lab1.ipynb',
      'html'
    );
    expect(clicked).toEqual(['lab1.gradcheck.html']);
    click.mockRestore();
  });

  it("opens the tolerance dialog for a card's check, recording through the model", async () => {
    // Given a failed check's card
    const { requester, model, byId } = setup();
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b2', false))
    );
    await model.refresh();
    // When its Edit tolerance button is pressed and the dialog submits a justified change
    byId('gradcheck-edit-tolerance').click();
    const dialog = editToleranceDialog as jest.MockedFunction<
      typeof editToleranceDialog
    >;
    expect(dialog).toHaveBeenCalledTimes(1);
    expect(dialog.mock.calls[0][0].id).toBe('x*x@b2');
    await dialog.mock.calls[0][1]({
      target: 'tolerance',
      rtol: 0.5,
      justification: 'why'
    });
    // Then the change went to that notebook and check
    expect(requester.changeTolerance).toHaveBeenCalledWith({
      notebook: 'work/lab1.ipynb',
      check_id: 'x*x@b2',
      target: 'tolerance',
      rtol: 0.5,
      justification: 'why'
    });
  });

  it('loads the ledger without fetching a blob, and fetches the active notebook\'s on "Show values"', async () => {
    // Given the panel on work/lab1.ipynb whose ledger holds a stored check
    const { requester, model, all } = setup();
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', bigEntries())
    );
    // When the ledger view loads
    await model.refresh();
    await until(() => all('gradcheck-stored').length === 3);
    // Then no blob is read
    expect(requester.getLedgerBlob).not.toHaveBeenCalled();
    // When the observed gradient's Show values is pressed
    const gradient = all('gradcheck-stored').find(
      node => node.dataset.sha256 === GRAD_SHA
    )!;
    const inGradient = (testid: string) =>
      gradient.querySelector(`[data-testid="${testid}"]`) as HTMLElement;
    inGradient('gradcheck-show-values').click();
    await until(() => inGradient('gradcheck-stored-status').textContent !== '');
    // Then the first page of that blob is read from the notebook's ledger and shown
    expect(requester.getLedgerBlob).toHaveBeenCalledWith(
      'work/lab1.ipynb',
      GRAD_SHA,
      0
    );
    expect(inGradient('gradcheck-stored-values').textContent).toBe(
      '1.0, 2.0, 3.0'
    );
    expect(inGradient('gradcheck-stored-status').textContent).toBe(
      'values 1–3 of 3'
    );
  });
});

function panelBody(byId: (testid: string) => HTMLElement): HTMLElement {
  return byId('gradcheck-declare-form').closest(
    '.jp-gradcheck-body'
  ) as HTMLElement;
}
