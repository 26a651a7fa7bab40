/**
 * The side panel's model: the server's handshake, the active notebook, its
 * ledger grouped by check, the defaults of new checks, the last run's field
 * errors and the last verify. It makes every REST call, through the
 * requester it is given, and after each of its own actions binds the
 * notebook (`metadata.gradcheck`) to the ledger the action changed.
 *
 * It never touches the DOM: the panel renders it and re-renders on `changed`.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { applyBinding, basename, bindingFromLedger } from './binding';
import { ICheckView, groupByCheck } from './grouping';
import { trans } from './i18n';
import {
  ExportFormat,
  GradcheckRequestError,
  GradcheckValidationError,
  IGradcheckRequester
} from './requester';
import { FALLBACK_DEFAULTS, IDefaults } from './settings';
import {
  IActiveNotebook,
  IExportFile,
  IGradcheckModel,
  LedgerState,
  VerifyState
} from './tokens';
import { IBlobPage, ILedgerAnswer, IServerStatus, JSONValue } from './types';
import {
  FieldErrors,
  IFormValues,
  IToleranceEdit,
  buildCheck,
  fieldForError,
  justificationProblem
} from './validation';
import { summariseVerify } from './verifyReport';

/** The notice shown when an action's ledger does not verify, so the binding is left alone (in the user's language). */
export function brokenChainNotice(): string {
  return trans.__(
    'The notebook binding was not updated: the ledger does not verify. Press Verify to see why.'
  );
}

/** A reason to refuse a change before any request: the field at fault and why. */
export interface IProblem {
  field: string;
  message: string;
}

function noNotebook(): IProblem {
  return {
    field: '',
    message: trans.__(
      'open a notebook first: changes are recorded in its ledger'
    )
  };
}

function refusal(problem: IProblem): GradcheckValidationError {
  return new GradcheckValidationError(problem.message, problem.field);
}

/** The file name of an export: `lab1.gradcheck.csv` for `work/lab1.ipynb` as CSV. */
export function exportFileName(path: string, format: ExportFormat): string {
  return `${basename(path).replace(/\.ipynb$/, '')}.gradcheck.${format}`;
}

/**
 * What the form shows for a refused check. A tolerance that contradicts the
 * ledger's current one is changed with the check's "Edit tolerance…" button,
 * not with the command line the server's message names for a terminal.
 */
export function formMessage(error: GradcheckRequestError): string {
  if (/gradcheck tolerance --check/.test(error.message)) {
    return trans.__(
      'this check already has a tolerance in its ledger, and the form gives another: leave the tolerance fields empty to use it, or change it with "Edit tolerance…" on the check below, with a justification (nothing was run or written)'
    );
  }
  return error.message;
}

/** Why a tolerance change may not be sent, as a field and a message; null when it may. */
export function toleranceEditProblem(edit: IToleranceEdit): IProblem | null {
  const justification = justificationProblem(edit.justification ?? '');
  if (justification) {
    return { field: 'justification', message: justification };
  }
  if (edit.target !== 'tolerance' && edit.target !== 'finite_difference') {
    return {
      field: 'target',
      message: trans.__('the target must be tolerance or finite_difference')
    };
  }
  for (const key of ['rtol', 'atol'] as const) {
    const value = edit[key];
    if (
      value !== undefined &&
      !(typeof value === 'number' && Number.isFinite(value) && value >= 0)
    ) {
      return {
        field: key,
        message: trans.__(
          '%1 must be a non-negative number, not "%2"',
          key,
          String(value)
        )
      };
    }
  }
  if (edit.rtol === undefined && edit.atol === undefined) {
    return {
      field: 'rtol',
      message: trans.__('give a new rtol, a new atol, or both')
    };
  }
  return null;
}

/** Why an expectation revision may not be sent, as a field and a message; null when it may. */
export function expectationEditProblem(edit: {
  analytical_gradient: JSONValue;
  justification: string;
}): IProblem | null {
  const justification = justificationProblem(edit.justification ?? '');
  if (justification) {
    return { field: 'justification', message: justification };
  }
  const value = edit.analytical_gradient;
  if (
    value === undefined ||
    value === null ||
    (typeof value === 'string' && !value.trim())
  ) {
    return {
      field: 'analytical_gradient',
      message: trans.__('write the new expected gradient')
    };
  }
  return null;
}

/** The side panel's state and its REST calls. */
export class GradcheckModel implements IGradcheckModel {
  constructor(requester: IGradcheckRequester) {
    this.requester = requester;
  }

  /** The REST calls the model makes. */
  readonly requester: IGradcheckRequester;

  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get notebook(): IActiveNotebook | null {
    return this._notebook;
  }
  get notebookPath(): string | null {
    return this._notebook ? this._notebook.path : null;
  }
  get status(): IServerStatus | null {
    return this._status;
  }
  get serverError(): string | null {
    return this._serverError;
  }
  get defaults(): IDefaults {
    return this._defaults;
  }
  get ledgerState(): LedgerState {
    return this._ledgerState;
  }
  get ledger(): ILedgerAnswer | null {
    return this._ledger;
  }
  get ledgerError(): string | null {
    return this._ledgerError;
  }
  get views(): ReadonlyArray<ICheckView> {
    return this._views;
  }
  get formErrors(): FieldErrors {
    return this._formErrors;
  }
  get running(): boolean {
    return this._running;
  }
  get loading(): boolean {
    return this._loading;
  }
  get notice(): string {
    return this._notice;
  }
  get verification(): VerifyState {
    return this._verification;
  }

  setNotebook(notebook: IActiveNotebook | null): void {
    this._notebook = notebook;
    this._verification = { state: 'none' };
    this._changed.emit();
  }

  setDefaults(defaults: IDefaults): void {
    this._defaults = defaults;
    this._changed.emit();
  }

  /**
   * Reload status and the active notebook's ledger. Reloads run one after the
   * other, and each call waits for a reload that started after it, so what an
   * action wrote is always in the ledger the notebook is bound to.
   */
  refresh(): Promise<void> {
    const next = this._refreshing.then(() => this._reload());
    this._refreshing = next.catch(() => undefined);
    return next;
  }

  /** Validate the form's values, `POST checks`, keep the server's field error, then reload and rebind. */
  async run(values: IFormValues): Promise<void> {
    if (this._running) {
      return;
    }
    const path = this.notebookPath;
    if (!path) {
      this._setFormErrors({
        '': trans.__('open a notebook first: checks are recorded in its ledger')
      });
      return;
    }
    const built = buildCheck(values, this._status?.devices ?? []);
    if (!built.ok) {
      this._setFormErrors(built.errors);
      return;
    }
    this._formErrors = {};
    this._running = true;
    this._changed.emit();
    try {
      await this.requester.runCheck(path, built.value);
    } catch (error) {
      if (error instanceof GradcheckRequestError) {
        const inputs = Object.keys(built.value.inputs ?? {});
        this._formErrors = {
          [fieldForError(error.field, inputs)]: formMessage(error)
        };
      } else {
        this._formErrors = { '': (error as Error).message };
      }
    } finally {
      this._running = false;
      this._changed.emit();
      await this._afterAction();
    }
  }

  async changeTolerance(
    checkId: string,
    edit: IToleranceEdit,
    notebook: string | null = this.notebookPath
  ): Promise<void> {
    await this._justifiedEdit(notebook, toleranceEditProblem(edit), path =>
      this.requester.changeTolerance({
        notebook: path,
        check_id: checkId,
        ...edit,
        justification: edit.justification.trim()
      })
    );
  }

  async changeExpectation(
    checkId: string,
    edit: { analytical_gradient: JSONValue; justification: string },
    notebook: string | null = this.notebookPath
  ): Promise<void> {
    await this._justifiedEdit(notebook, expectationEditProblem(edit), path =>
      this.requester.changeExpectation({
        notebook: path,
        check_id: checkId,
        ...edit,
        justification: edit.justification.trim()
      })
    );
  }

  /** Save the notebook when dirty (so its binding is on disk), `POST verify`, keep the summary, reload. */
  async verify(): Promise<void> {
    const notebook = this._notebook;
    const path = this.notebookPath;
    if (!notebook || !path) {
      this._setVerification({ state: 'no-notebook' });
      return;
    }
    this._setVerification({ state: 'running' });
    try {
      if (notebook.dirty) {
        await notebook.save();
      }
      const report = await this.requester.verifyLedger(path, false);
      this._setVerification({
        state: 'done',
        report,
        summary: summariseVerify(report)
      });
    } catch (error) {
      this._setVerification({
        state: 'failed',
        message: (error as Error).message
      });
    }
    await this.refresh();
  }

  /** `GET ledger/blob`: a page of a stored value's elements; the model's state is unchanged. */
  readValues(
    notebook: string,
    sha: string,
    offset: number
  ): Promise<IBlobPage> {
    return this.requester.getLedgerBlob(notebook, sha, offset);
  }

  /** `GET export` of the active notebook's ledger; the caller downloads it. */
  async exportLedger(format: ExportFormat): Promise<IExportFile> {
    const path = this.notebookPath;
    if (!path) {
      throw new Error(
        trans.__('Open a notebook first: its ledger is what is exported.')
      );
    }
    const blob = await this.requester.exportLedger(path, format);
    return { blob, format, filename: exportFileName(path, format) };
  }

  private async _reload(): Promise<void> {
    const path = this.notebookPath;
    this._loading = true;
    this._changed.emit();
    try {
      if (!(await this._handshake())) {
        return;
      }
      if (!path) {
        this._setLedger('no-notebook', null, [], null);
        return;
      }
      try {
        const ledger = await this.requester.getLedger(path);
        if (path !== this.notebookPath) {
          return;
        }
        const views = Array.isArray(ledger.entries)
          ? groupByCheck(ledger.entries)
          : [];
        this._setLedger('loaded', ledger, views, null);
      } catch (error) {
        this._setLedger('error', null, [], (error as Error).message);
      }
    } finally {
      this._loading = false;
      this._changed.emit();
    }
  }

  /** The version handshake, once; true when the server extension answered. */
  private async _handshake(): Promise<boolean> {
    if (this._status) {
      return true;
    }
    try {
      this._status = await this.requester.getStatus();
      this._serverError = null;
      this._changed.emit();
      return true;
    } catch (error) {
      this._serverError = (error as Error).message;
      return false;
    }
  }

  /** After an action: reload, then bind the notebook to the ledger it changed. */
  /** A justified edit: refused before any request without a notebook or with a problem,
   * else sent, then the ledger reloaded and the binding kept. */
  private async _justifiedEdit(
    notebook: string | null,
    problem: IProblem | null,
    send: (notebook: string) => Promise<unknown>
  ): Promise<void> {
    if (!notebook) {
      throw refusal(noNotebook());
    }
    if (problem) {
      throw refusal(problem);
    }
    await send(notebook);
    await this._afterAction();
  }

  async kernelAppended(): Promise<void> {
    await this._afterAction();
  }

  async notebookRenamed(): Promise<void> {
    await this._afterAction();
  }

  private async _afterAction(): Promise<void> {
    await this.refresh();
    const metadata = this._notebook?.metadata;
    if (!metadata || !this._ledger) {
      return;
    }
    if (this._ledger.chain && this._ledger.chain.ok === false) {
      // Rebinding to a broken chain, or over a binding the ledger no longer matches,
      // would hide the break from `verify`.
      this._setNotice(brokenChainNotice());
      return;
    }
    this._setNotice('');
    applyBinding(metadata, bindingFromLedger(this._ledger));
  }

  private _setLedger(
    state: LedgerState,
    ledger: ILedgerAnswer | null,
    views: ICheckView[],
    error: string | null
  ): void {
    this._ledgerState = state;
    this._ledger = ledger;
    this._views = views;
    this._ledgerError = error;
  }

  private _setFormErrors(errors: FieldErrors): void {
    this._formErrors = errors;
    this._changed.emit();
  }

  private _setNotice(notice: string): void {
    this._notice = notice;
    this._changed.emit();
  }

  private _setVerification(verification: VerifyState): void {
    this._verification = verification;
    this._changed.emit();
  }

  private readonly _changed = new Signal<this, void>(this);
  private _notebook: IActiveNotebook | null = null;
  private _status: IServerStatus | null = null;
  private _serverError: string | null = null;
  private _defaults: IDefaults = FALLBACK_DEFAULTS;
  private _ledgerState: LedgerState = 'idle';
  private _ledger: ILedgerAnswer | null = null;
  private _ledgerError: string | null = null;
  private _views: ICheckView[] = [];
  private _formErrors: FieldErrors = {};
  private _running = false;
  private _loading = false;
  private _notice = '';
  private _verification: VerifyState = { state: 'none' };
  private _refreshing: Promise<void> = Promise.resolve();
}
