/**
 * The side panel's model, with a fake requester at its edge: what each
 * action sends, the state it leaves, and the notebook binding it keeps.
 */
import {
  GradcheckModel,
  exportFileName,
  formMessage,
  toleranceEditProblem
} from '../model';
import { GradcheckRequestError, GradcheckValidationError } from '../requester';
import { FALLBACK_DEFAULTS } from '../settings';
import {
  FakeNotebook,
  STATUS,
  checkEntries,
  deferred,
  fakeRequester,
  builtSquare,
  formValues,
  honestVerifyAnswer,
  unknownNameRefusal,
  ledgerAnswer,
  until
} from './fakes';

/** A model on lab1.ipynb, counting its `changed` emissions. */
function setup(path: string | null = 'work/lab1.ipynb') {
  const requester = fakeRequester();
  const model = new GradcheckModel(requester);
  const notebook = path ? new FakeNotebook(path) : null;
  model.setNotebook(notebook);
  const emitted = { count: 0 };
  model.changed.connect(() => {
    emitted.count += 1;
  });
  return { requester, model, notebook, emitted };
}

describe('GradcheckModel.refresh', () => {
  it('loads the ledger of the active notebook, groups it by check and emits changed', async () => {
    // Given a server whose ledger for lab1 has a passing check and a failing one
    const { requester, model, emitted } = setup();
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', [
        ...checkEntries(1, 'x*x@b1', true),
        ...checkEntries(3, 'x*x@b2', false)
      ])
    );
    // When the model refreshes
    await model.refresh();
    // Then it shook hands once, asked for that notebook's ledger, and holds one view per check
    expect(requester.getStatus).toHaveBeenCalledTimes(1);
    expect(requester.getLedger).toHaveBeenCalledWith('work/lab1.ipynb');
    expect(model.status).toBe(STATUS);
    expect(model.ledgerState).toBe('loaded');
    expect(model.views.map(v => [v.id, v.status])).toEqual([
      ['x*x@b1', 'passed'],
      ['x*x@b2', 'failed']
    ]);
    expect(model.loading).toBe(false);
    expect(emitted.count).toBeGreaterThan(0);
    // And a second refresh does not repeat the handshake
    await model.refresh();
    expect(requester.getStatus).toHaveBeenCalledTimes(1);
    expect(requester.getLedger).toHaveBeenCalledTimes(2);
  });

  it('says the server extension is missing when the handshake fails, and recovers on retry', async () => {
    // Given a server without the gradcheck routes
    const { requester, model } = setup();
    requester.getStatus.mockRejectedValueOnce(
      new GradcheckRequestError(404, 'not_found', 'HTTP 404', null)
    );
    // When the model refreshes
    await model.refresh();
    // Then it records why, and asks for no ledger
    expect(model.serverError).toBe('HTTP 404');
    expect(model.status).toBeNull();
    expect(requester.getLedger).not.toHaveBeenCalled();
    expect(model.ledgerState).toBe('idle');
    // When the extension is enabled and the user tries again
    await model.refresh();
    // Then the problem is gone and the ledger is read
    expect(model.serverError).toBeNull();
    expect(model.ledgerState).toBe('loaded');
    expect(requester.getStatus).toHaveBeenCalledTimes(2);
  });

  it('reads no ledger while no notebook is open', async () => {
    const { requester, model } = setup(null);
    await model.refresh();
    expect(model.ledgerState).toBe('no-notebook');
    expect(model.notebookPath).toBeNull();
    expect(requester.getLedger).not.toHaveBeenCalled();
  });

  it('keeps why the ledger could not be read', async () => {
    const { requester, model } = setup();
    requester.getLedger.mockRejectedValueOnce(
      new GradcheckRequestError(400, 'bad_ledger', 'line 3 is not JSON', null)
    );
    await model.refresh();
    expect(model.ledgerState).toBe('error');
    expect(model.ledgerError).toBe('line 3 is not JSON');
    expect(model.ledger).toBeNull();
    expect(model.views).toEqual([]);
  });

  it('drops a ledger answer that arrives after the user switched notebooks', async () => {
    // Given a slow answer for lab1
    const { requester, model } = setup();
    const slow = deferred<ReturnType<typeof ledgerAnswer>>();
    requester.getLedger.mockReturnValueOnce(slow.promise);
    const refreshing = model.refresh();
    await until(() => requester.getLedger.mock.calls.length === 1);
    expect(requester.getLedger).toHaveBeenCalledWith('work/lab1.ipynb');
    // When lab2 becomes active before lab1's ledger arrives
    model.setNotebook(new FakeNotebook('work/lab2.ipynb'));
    slow.resolve(
      ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b1', true))
    );
    await refreshing;
    // Then lab1's checks are not shown for lab2
    expect(model.views).toEqual([]);
    expect(model.ledger).toBeNull();
  });

  it('runs reloads one after the other', async () => {
    // Given a first reload held at its ledger request
    const { requester, model } = setup();
    const first = deferred<ReturnType<typeof ledgerAnswer>>();
    requester.getLedger.mockReturnValueOnce(first.promise);
    const one = model.refresh();
    const two = model.refresh();
    await until(() => requester.getLedger.mock.calls.length === 1);
    await new Promise(resolve => setTimeout(resolve, 0));
    // Then the second has not asked yet
    expect(requester.getLedger).toHaveBeenCalledTimes(1);
    // When the first answer arrives, the second reload follows
    first.resolve(ledgerAnswer('work/lab1.ipynb', []));
    await Promise.all([one, two]);
    expect(requester.getLedger).toHaveBeenCalledTimes(2);
  });
});

describe('GradcheckModel.run', () => {
  it('refuses invalid fields with an error beside the field, and sends nothing', async () => {
    // Given malformed inputs
    const { requester, model, emitted } = setup();
    // When the check is run
    await model.run(formValues({ inputs: '{"x": }' }));
    // Then the inputs field has the message, and no request was made
    expect(model.formErrors.inputs).toContain('not valid JSON');
    expect(Object.keys(model.formErrors)).toEqual(['inputs']);
    expect(requester.runCheck).not.toHaveBeenCalled();
    expect(requester.getLedger).not.toHaveBeenCalled();
    expect(emitted.count).toBe(1);
  });

  it('asks for a notebook first when none is open', async () => {
    const { requester, model } = setup(null);
    await model.run(formValues());
    expect(model.formErrors).toEqual({
      '': 'open a notebook first: checks are recorded in its ledger'
    });
    expect(requester.runCheck).not.toHaveBeenCalled();
  });

  it('refuses a device the server reports absent', async () => {
    const { requester, model } = setup();
    await model.refresh();
    await model.run(formValues({ device: 'cuda' }));
    expect(model.formErrors.device).toBe(
      'cuda is not available: no CUDA device'
    );
    expect(requester.runCheck).not.toHaveBeenCalled();
  });

  it('posts the built check, then reloads and binds the notebook to the new ledger', async () => {
    // Given the server records the run as two entries
    const { requester, model, notebook } = setup();
    await model.refresh();
    let runningDuringRequest = false;
    requester.runCheck.mockImplementationOnce(async () => {
      runningDuringRequest = model.running;
      requester.getLedger.mockResolvedValue(
        ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b1', true))
      );
      return {
        record: {},
        ledger: { path: 'work/lab1.gradcheck.jsonl', entries: 2, head: 'hash2' }
      };
    });
    // When x*x at 3 with the expectation 6 is run
    await model.run(formValues());
    // Then the check sent is the form's, parsed
    expect(requester.runCheck).toHaveBeenCalledWith(
      'work/lab1.ipynb',
      builtSquare()
    );
    expect(runningDuringRequest).toBe(true);
    expect(model.running).toBe(false);
    // And the ledger was read again after the run
    const runOrder = requester.runCheck.mock.invocationCallOrder[0];
    const lastRead =
      requester.getLedger.mock.invocationCallOrder[
        requester.getLedger.mock.calls.length - 1
      ];
    expect(lastRead).toBeGreaterThan(runOrder);
    expect(model.views.map(v => v.id)).toEqual(['x*x@b1']);
    // And the notebook's metadata names the ledger, its count and its head
    expect(notebook!.metadata!.values.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'hash2'
    });
    expect(model.formErrors).toEqual({});
  });

  it("puts the server's refusal beside the field it names, and still reloads", async () => {
    // Given a server that cannot parse the function
    const { requester, model } = setup();
    await model.refresh();
    requester.runCheck.mockRejectedValueOnce(unknownNameRefusal());
    // When x*y is run
    await model.run(formValues({ function: 'x*y' }));
    // Then the message sits at the function field
    expect(model.formErrors).toEqual({ function: "unknown name 'y'" });
    expect(requester.getLedger).toHaveBeenCalledTimes(2);
    // And an error about one input goes to the inputs field
    requester.runCheck.mockRejectedValueOnce(
      new GradcheckRequestError(400, 'bad_input', 'x is ragged', 'x')
    );
    await model.run(formValues());
    expect(model.formErrors).toEqual({ inputs: 'x is ragged' });
  });

  it('does not rebind to a ledger whose chain is broken, and says so', async () => {
    // Given a notebook already bound, and a ledger that no longer verifies
    const { requester, model, notebook } = setup();
    const bound = { ledger: 'lab1.gradcheck.jsonl', entries: 1, head: 'old' };
    notebook!.metadata!.values.gradcheck = bound;
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b1', true), false)
    );
    // When a check is run
    await model.run(formValues());
    // Then the binding is untouched and the notice says why
    expect(notebook!.metadata!.values.gradcheck).toBe(bound);
    expect(notebook!.metadata!.writes).toBe(0);
    expect(model.notice).toBe(
      'The notebook binding was not updated: the ledger does not verify. Press Verify to see why.'
    );
    // When the chain is healthy again, the next action clears the notice and rebinds
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', checkEntries(1, 'x*x@b1', true))
    );
    await model.run(formValues());
    expect(model.notice).toBe('');
    expect(notebook!.metadata!.values.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'hash2'
    });
  });
});

describe('GradcheckModel.changeTolerance and changeExpectation', () => {
  it('refuses a tolerance edit without a justification, and sends nothing', async () => {
    const { requester, model } = setup();
    const refused = model.changeTolerance('x*x@b2', {
      target: 'tolerance',
      rtol: 0.5,
      justification: '   '
    });
    await expect(refused).rejects.toBeInstanceOf(GradcheckValidationError);
    await expect(refused).rejects.toMatchObject({
      field: 'justification',
      message: expect.stringContaining('a justification is required')
    });
    expect(requester.changeTolerance).not.toHaveBeenCalled();
    expect(requester.getLedger).not.toHaveBeenCalled();
  });

  it('sends a justified tolerance edit for the notebook the dialog was opened on, then rebinds', async () => {
    // Given a server whose ledger gains the change
    const { requester, model, notebook } = setup();
    requester.getLedger.mockResolvedValue(
      ledgerAnswer('work/lab1.ipynb', [
        ...checkEntries(1, 'x*x@b2', false),
        {
          seq: 3,
          kind: 'tolerance_change',
          check_id: 'x*x@b2',
          data: {
            target: 'tolerance',
            new: { rtol: 0.5 },
            justification: 'slip'
          },
          hash: 'hash3'
        }
      ])
    );
    // When rtol 0.5 is recorded with its justification
    await model.changeTolerance(
      'x*x@b2',
      { target: 'tolerance', rtol: 0.5, justification: ' a slip for 2*x ' },
      'work/lab1.ipynb'
    );
    // Then the body names the notebook, the check, the change and the trimmed justification
    expect(requester.changeTolerance).toHaveBeenCalledWith({
      notebook: 'work/lab1.ipynb',
      check_id: 'x*x@b2',
      target: 'tolerance',
      rtol: 0.5,
      justification: 'a slip for 2*x'
    });
    // And the history and the binding follow the ledger
    expect(model.views[0].history.map(h => h.justification)).toEqual(['slip']);
    expect(notebook!.metadata!.values.gradcheck).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 3,
      head: 'hash3'
    });
  });

  it("lets the server's refusal through to the dialog, without reloading", async () => {
    const { requester, model } = setup();
    requester.changeTolerance.mockRejectedValueOnce(
      new GradcheckRequestError(
        400,
        'invalid',
        'rtol must be below 1',
        'tolerance.rtol'
      )
    );
    await expect(
      model.changeTolerance('x*x@b2', {
        target: 'tolerance',
        rtol: 5,
        justification: 'why'
      })
    ).rejects.toMatchObject({ field: 'tolerance.rtol' });
    expect(requester.getLedger).not.toHaveBeenCalled();
  });

  it('refuses an expectation revision without a justification, and sends a justified one', async () => {
    const { requester, model } = setup();
    await expect(
      model.changeExpectation('x*x@b2', {
        analytical_gradient: '2*x',
        justification: ''
      })
    ).rejects.toMatchObject({ field: 'justification' });
    expect(requester.changeExpectation).not.toHaveBeenCalled();
    await model.changeExpectation('x*x@b2', {
      analytical_gradient: '2*x',
      justification: 'the power rule'
    });
    expect(requester.changeExpectation).toHaveBeenCalledWith({
      notebook: 'work/lab1.ipynb',
      check_id: 'x*x@b2',
      analytical_gradient: '2*x',
      justification: 'the power rule'
    });
  });

  it('names what is wrong with a tolerance edit', () => {
    expect(
      toleranceEditProblem({ target: 'tolerance', justification: 'why' })
    ).toEqual({
      field: 'rtol',
      message: 'give a new rtol, a new atol, or both'
    });
    expect(
      toleranceEditProblem({
        target: 'tolerance',
        atol: -1,
        justification: 'why'
      })?.field
    ).toBe('atol');
    expect(
      toleranceEditProblem({
        target: 'finite_difference',
        atol: 1e-6,
        justification: 'why'
      })
    ).toBeNull();
  });
});

describe('GradcheckModel.verify', () => {
  it('saves a dirty notebook first, then keeps the summarised report and reloads', async () => {
    // Given unsaved changes, and a report with a widening flagged for the grader
    const { requester, model, notebook } = setup();
    notebook!.dirty = true;
    const report = honestVerifyAnswer('x*x@b2');
    requester.verifyLedger.mockResolvedValueOnce(report);
    // When the ledger is verified
    await model.verify();
    // Then the notebook was saved before the request, which verified its ledger without replay
    expect(notebook!.save).toHaveBeenCalledTimes(1);
    expect(notebook!.save.mock.invocationCallOrder[0]).toBeLessThan(
      requester.verifyLedger.mock.invocationCallOrder[0]
    );
    expect(requester.verifyLedger).toHaveBeenCalledWith(
      'work/lab1.ipynb',
      false
    );
    // And the summary is kept beside the report
    const verification = model.verification;
    expect(verification.state).toBe('done');
    if (verification.state === 'done') {
      expect(verification.report).toBe(report);
      expect(verification.summary.ok).toBe(true);
      expect(verification.summary.lines).toEqual([
        { level: 'info', text: 'chain OK · binding OK · 5 entries' },
        { level: 'flag', text: 'x*x@b2: widened after failure (entries 5)' }
      ]);
    }
    expect(requester.getLedger).toHaveBeenCalledTimes(1);
  });

  it('does not save a clean notebook, and keeps why a verify failed', async () => {
    const { requester, model, notebook } = setup();
    requester.verifyLedger.mockRejectedValueOnce(new Error('worker timed out'));
    await model.verify();
    expect(notebook!.save).not.toHaveBeenCalled();
    expect(model.verification).toEqual({
      state: 'failed',
      message: 'worker timed out'
    });
  });

  it('asks for a notebook when none is open, and forgets the result when the notebook changes', async () => {
    const { requester, model } = setup(null);
    await model.verify();
    expect(model.verification).toEqual({ state: 'no-notebook' });
    expect(requester.verifyLedger).not.toHaveBeenCalled();
    model.setNotebook(new FakeNotebook('lab2.ipynb'));
    expect(model.verification).toEqual({ state: 'none' });
  });
});

describe('GradcheckModel.exportLedger', () => {
  it('asks for the export of the active notebook in the chosen format, named after the notebook', async () => {
    const { requester, model } = setup();
    const file = await model.exportLedger('csv');
    expect(requester.exportLedger).toHaveBeenCalledWith(
      'work/lab1.ipynb',
      'csv'
    );
    expect(file.filename).toBe('lab1.gradcheck.csv');
    expect(file.format).toBe('csv');
    expect(await file.blob.text()).toBe('student,assignment\n');
  });

  it('refuses without a notebook', async () => {
    const { requester, model } = setup(null);
    await expect(model.exportLedger('html')).rejects.toThrow(
      'Open a notebook first'
    );
    expect(requester.exportLedger).not.toHaveBeenCalled();
  });

  it('names the file from the notebook, not its folder', () => {
    expect(exportFileName('course/week 2/lab1.ipynb', 'html')).toBe(
      'lab1.gradcheck.html'
    );
    expect(exportFileName('notes.txt', 'json')).toBe(
      'notes.txt.gradcheck.json'
    );
  });
});

describe('GradcheckModel.setDefaults', () => {
  it('starts from the fallback defaults and takes the settings', () => {
    const { model, emitted } = setup();
    expect(model.defaults).toBe(FALLBACK_DEFAULTS);
    const defaults = { ...FALLBACK_DEFAULTS, dtype: 'float32', rtol: 1e-4 };
    model.setDefaults(defaults);
    expect(model.defaults).toEqual(defaults);
    expect(emitted.count).toBe(1);
  });
});

describe('a tolerance the form contradicts', () => {
  it('points to "Edit tolerance…", not to the command line, in either language the server answered', () => {
    // Given the server's refusal of a form rtol for a check whose ledger has another
    for (const message of [
      "check 'x*x@1': tolerance rtol=0.1 atol=0 differs from the ledger's current rtol=1e-07 atol=1e-10; change it with `jupyter gradcheck tolerance --check x*x@1 --rtol R --atol A --justification TEXT` (nothing was run or written)",
      "comprobación 'x*x@1': tolerance rtol=0.1 atol=0 difiere de la actual del registro, rtol=1e-07 atol=1e-10; cámbiela con `jupyter gradcheck tolerance --check x*x@1 --rtol R --atol A --justification TEXTO` (no se ejecutó ni se escribió nada)"
    ]) {
      const shown = formMessage(
        new GradcheckRequestError(400, 'bad_input', message, 'tolerance.rtol')
      );
      // Then the form names the button, and no command
      expect(shown).toContain('"Edit tolerance…"');
      expect(shown).not.toContain('jupyter gradcheck');
    }
    // And any other refusal is shown as the server wrote it
    expect(
      formMessage(
        new GradcheckRequestError(
          400,
          'bad_input',
          'rtol must be >= 0',
          'tolerance.rtol'
        )
      )
    ).toBe('rtol must be >= 0');
  });
});
