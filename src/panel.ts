/**
 * The right-sidebar panel: the view of a `GradcheckModel`. It renders the
 * model's state (the active notebook, its ledger grouped by check, the
 * declare form's errors, the last verify) and re-renders on `changed`; user
 * events go to the model, which makes every REST call and keeps the
 * notebook's `metadata.gradcheck` binding current.
 */
import { showErrorMessage } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { badge } from './badge';
import { basename, bindingState } from './binding';
import { DeclareForm } from './declareForm';
import { editToleranceDialog, reviseExpectationDialog } from './dialogs';
import { Child, append, el, replaceChildren } from './dom';
import { ICheckView } from './grouping';
import { trans } from './i18n';
import { gradcheckIcon } from './icon';
import { ICheckActions, button, checkCard } from './ledgerView';
import { EXPORT_FORMATS, ExportFormat } from './requester';
import { IDefaults } from './settings';
import { IExportFile, IGradcheckModel, PANEL_ID, VerifyState } from './tokens';
import { ILedgerAnswer } from './types';
import { IVerifySummary } from './verifyReport';

/** The command that enables the server extension when the handshake fails. */
export const ENABLE_COMMAND =
  'jupyter server extension enable jupyterlab_gradcheck';

/** The side panel. */
export class GradcheckPanel extends Widget {
  /** The state this panel shows. */
  readonly model: IGradcheckModel;
  private readonly form: DeclareForm;
  private readonly header: HTMLElement;
  private readonly problem: HTMLElement;
  private readonly body: HTMLElement;
  private readonly checks: HTMLElement;
  private readonly verifyResult: HTMLElement;
  private readonly notice: HTMLElement;
  private readonly formatSelect: HTMLSelectElement;
  /** What each part of the panel was last rendered from, so unchanged parts are left alone. */
  private readonly shown = new Map<string, unknown[]>();

  constructor(model: IGradcheckModel) {
    super();
    this.model = model;
    this.id = PANEL_ID;
    this.addClass('jp-gradcheck-panel');
    this.title.icon = gradcheckIcon;
    this.title.caption = trans.__(
      'Gradient check: expectations, observations and the ledger'
    );
    this.node.dataset.testid = 'gradcheck-panel';

    this.form = new DeclareForm(() => void this.run());
    this.header = el('div', {
      class: 'jp-gradcheck-header',
      testid: 'gradcheck-header'
    });
    this.problem = el('div', {
      class: 'jp-gradcheck-problem',
      testid: 'gradcheck-server-problem',
      hidden: true
    });
    this.checks = el('div', {
      class: 'jp-gradcheck-checks',
      testid: 'gradcheck-checks'
    });
    this.verifyResult = el('div', {
      class: 'jp-gradcheck-verify-result',
      testid: 'gradcheck-verify-result'
    });
    this.notice = el('div', {
      class: 'jp-gradcheck-field-error',
      testid: 'gradcheck-notice',
      role: 'status'
    });
    this.formatSelect = el(
      'select',
      { class: 'jp-mod-styled', testid: 'gradcheck-export-format' },
      EXPORT_FORMATS.map(f => el('option', { value: f }, f.toUpperCase()))
    );
    this.body = el(
      'div',
      { class: 'jp-gradcheck-body' },
      el(
        'details',
        { class: 'jp-gradcheck-section', open: true },
        el('summary', {}, trans.__('Declare a check')),
        this.form.node
      ),
      el(
        'div',
        { class: 'jp-gradcheck-section jp-gradcheck-ledger-actions' },
        this.formatSelect,
        button(
          trans.__('Export'),
          'gradcheck-export',
          () => void this.exportLedger(this.formatSelect.value as ExportFormat)
        ),
        button(
          trans.__('Verify'),
          'gradcheck-verify',
          () => void this.verify()
        ),
        button(
          trans.__('Refresh'),
          'gradcheck-refresh',
          () => void this.refresh()
        ),
        this.verifyResult
      ),
      this.notice,
      this.checks
    );
    append(this.node, this.header, this.problem, this.body);

    model.changed.connect(this.render, this);
    this.render();
  }

  /** The active notebook's server-relative path, or null. */
  get notebookPath(): string | null {
    return this.model.notebookPath;
  }

  /** Take new defaults from the settings. */
  setDefaults(defaults: IDefaults): void {
    this.model.setDefaults(defaults);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refresh();
  }

  /** Reload status and the active notebook's ledger. */
  refresh(): Promise<void> {
    return this.model.refresh();
  }

  /** Run the check the declare form describes. */
  run(): Promise<void> {
    return this.model.run(this.form.values());
  }

  /** Download the active notebook's ledger export as a file. */
  async exportLedger(format: ExportFormat): Promise<void> {
    if (!this.model.notebookPath) {
      await showErrorMessage(
        trans.__('Export ledger'),
        trans.__('Open a notebook first: its ledger is what is exported.')
      );
      return;
    }
    try {
      download(await this.model.exportLedger(format));
    } catch (error) {
      await showErrorMessage(
        trans.__('Export ledger'),
        (error as Error).message
      );
    }
    await this.model.refresh();
  }

  /** Save the notebook (so its binding is on disk), verify its ledger and show the report. */
  verify(): Promise<void> {
    return this.model.verify();
  }

  /** Whether the values a part was rendered from changed since it was last rendered. */
  private differs(part: string, ...values: unknown[]): boolean {
    const before = this.shown.get(part);
    if (
      before &&
      before.length === values.length &&
      before.every((value, i) => value === values[i])
    ) {
      return false;
    }
    this.shown.set(part, values);
    return true;
  }

  /** Render the model's state; parts whose state did not change are left as they are. */
  private render(): void {
    const model = this.model;
    this.renderServer();
    this.renderForm();
    if (this.differs('header', model.notebookPath, model.ledger)) {
      this.renderHeader(model.notebookPath, model.ledger);
    }
    if (
      this.differs('checks', model.ledgerState, model.ledgerError, model.views)
    ) {
      this.renderChecks();
    }
    if (this.notice.textContent !== model.notice) {
      this.notice.textContent = model.notice;
    }
    if (this.differs('verify', model.verification)) {
      replaceChildren(this.verifyResult, verifyResult(model.verification));
    }
  }

  /** The body while the server extension answers; what to do when it does not. */
  private renderServer(): void {
    const error = this.model.serverError;
    this.problem.hidden = error === null;
    this.body.hidden = error !== null;
    if (error === null || !this.differs('problem', error)) {
      return;
    }
    replaceChildren(
      this.problem,
      el(
        'p',
        { class: 'jp-gradcheck-problem-title' },
        trans.__('The server extension is not installed or not enabled.')
      ),
      el(
        'p',
        {},
        trans.__(
          'The panel needs the jupyterlab_gradcheck server extension to run and record checks. Enable it, then restart JupyterLab:'
        )
      ),
      el('pre', { testid: 'gradcheck-fix-command' }, ENABLE_COMMAND),
      el('p', { class: 'jp-gradcheck-meta' }, `(${error})`),
      button(
        trans.__('Try again'),
        'gradcheck-retry',
        () => void this.refresh()
      )
    );
  }

  /** The server's devices once it answered, the defaults when they change, the errors and Run. */
  private renderForm(): void {
    const { status, defaults, formErrors, running } = this.model;
    const answered = this.differs('status', status) && status !== null;
    if (answered) {
      this.form.setDevices(
        status.devices,
        defaults.device,
        status.error ?? null
      );
    }
    if (this.differs('defaults', defaults) || answered) {
      // Selects take the defaults again: only when they (or the device list) change.
      this.form.applyDefaults(defaults);
    }
    if (this.differs('errors', formErrors)) {
      this.form.showErrors(formErrors);
    }
    if (this.differs('running', running)) {
      this.form.setBusy(running);
    }
  }

  private renderHeader(
    path: string | null,
    ledger: ILedgerAnswer | null
  ): void {
    const chain = ledger?.chain;
    const entries =
      ledger && Array.isArray(ledger.entries)
        ? // entries count from seq 1, as verify counts them: the genesis entry (seq 0) names the ledger
          ledger.entries.filter(entry => entry.seq > 0).length
        : 0;
    replaceChildren(
      this.header,
      el('div', { class: 'jp-gradcheck-title' }, trans.__('Gradient check')),
      el(
        'div',
        {
          class: 'jp-gradcheck-notebook',
          testid: 'gradcheck-notebook',
          title: path ?? ''
        },
        path ? basename(path) : trans.__('no notebook')
      ),
      ledger
        ? el(
            'div',
            { class: 'jp-gradcheck-chain', testid: 'gradcheck-chain' },
            chainBadge(chain, entries),
            bindingNote(ledger),
            el(
              'span',
              { class: 'jp-gradcheck-meta' },
              ' ' + trans._n('%1 entry', '%1 entries', entries)
            )
          )
        : null
    );
  }

  private renderChecks(): void {
    const { ledgerState, ledgerError, views } = this.model;
    if (ledgerState === 'idle') {
      replaceChildren(this.checks);
    } else if (ledgerState === 'no-notebook') {
      replaceChildren(
        this.checks,
        el(
          'p',
          { class: 'jp-gradcheck-muted', testid: 'gradcheck-no-notebook' },
          trans.__('Open a notebook to see and declare its gradient checks.')
        )
      );
    } else if (ledgerState === 'error') {
      replaceChildren(
        this.checks,
        el(
          'div',
          { class: 'jp-gradcheck-field-error' },
          trans.__('Could not read the ledger: %1', ledgerError)
        )
      );
    } else if (!views.length) {
      replaceChildren(
        this.checks,
        el(
          'p',
          { class: 'jp-gradcheck-muted', testid: 'gradcheck-empty' },
          trans.__('No checks yet. Write the expectation first, then run.')
        )
      );
    } else {
      const notebook = this.model.notebookPath;
      const actions: ICheckActions = {
        editTolerance: (view: ICheckView) => void this.editTolerance(view),
        reviseExpectation: (view: ICheckView) =>
          void this.reviseExpectation(view),
        // a stored value's elements are read only when asked, from the ledger these cards came from
        showValues: notebook
          ? (sha: string, offset: number) =>
              this.model.readValues(notebook, sha, offset)
          : undefined
      };
      replaceChildren(
        this.checks,
        [...views].reverse().map(view => checkCard(view, actions))
      );
    }
  }

  /** The tolerance dialog for a check of the active notebook; the model records the change and rebinds. */
  private async editTolerance(view: ICheckView): Promise<void> {
    const notebook = this.model.notebookPath;
    if (notebook) {
      await editToleranceDialog(view, edit =>
        this.model.changeTolerance(view.id, edit, notebook)
      );
    }
  }

  private async reviseExpectation(view: ICheckView): Promise<void> {
    const notebook = this.model.notebookPath;
    if (notebook) {
      await reviseExpectationDialog(view, edit =>
        this.model.changeExpectation(view.id, edit, notebook)
      );
    }
  }
}

/** Download an export through a temporary link. */
function download(file: IExportFile): void {
  const url = URL.createObjectURL(file.blob);
  const link = el('a', { href: url, download: file.filename, hidden: true });
  document.body.appendChild(link);
  link.click();
  link.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/**
 * The binding's word in the header, as `verify` judges the saved notebook: a
 * red badge only when verify would fail on it; a quiet note when the ledger
 * is only ahead of the saved notebook (saving writes the binding).
 */
function bindingNote(ledger: ILedgerAnswer): HTMLElement | null {
  const state = bindingState(ledger);
  if (state === 'broken') {
    return badge('failed', trans.__('binding broken'));
  }
  if (state === 'behind') {
    return el(
      'span',
      {
        class: 'jp-gradcheck-meta jp-gradcheck-binding-behind',
        testid: 'gradcheck-binding-behind',
        title: trans.__(
          'The saved notebook does not bind the newest entries yet; saving the notebook writes its binding.'
        )
      },
      ' ' + trans.__('binding not saved yet')
    );
  }
  return null;
}

function chainBadge(
  chain: ILedgerAnswer['chain'],
  entries: number
): HTMLElement {
  if (!entries) {
    return badge('not_run', trans.__('empty ledger'));
  }
  const ok = chain?.chain_ok ?? chain?.ok;
  if (typeof ok !== 'boolean') {
    return badge('not_run', trans.__('chain unknown'));
  }
  const node = badge(
    ok ? 'passed' : 'failed',
    ok ? trans.__('chain OK') : trans.__('chain broken')
  );

  node.dataset.testid = 'gradcheck-chain-badge';
  return node;
}

/** What the verify area shows for the last verify. */
function verifyResult(verification: VerifyState): Child {
  switch (verification.state) {
    case 'none':
      return null;
    case 'no-notebook':
      return trans.__('Open a notebook first: its ledger is what is verified.');
    case 'running':
      return trans.__('Verifying…');
    case 'failed':
      return el(
        'div',
        { class: 'jp-gradcheck-field-error' },
        trans.__('Verify failed: %1', verification.message)
      );
    case 'done':
      return verifyReport(verification.report, verification.summary);
  }
}

/** A verify report as a verdict badge and its lines. */
function verifyReport(
  report: { [key: string]: unknown },
  summary: IVerifySummary
): HTMLElement {
  return el(
    'div',
    { testid: 'gradcheck-verify-report', 'data-ok': String(summary.ok) },
    badge(
      summary.ok ? 'passed' : 'failed',
      summary.ok ? trans.__('verified') : trans.__('verification failed')
    ),
    el(
      'ul',
      { class: 'jp-gradcheck-verify-lines' },
      summary.lines.map(line =>
        el(
          'li',
          {
            class: `jp-gradcheck-verify-${line.level}`,
            'data-level': line.level
          },
          line.text
        )
      )
    ),
    el(
      'details',
      {},
      el('summary', {}, trans.__('full report')),
      el('pre', {}, JSON.stringify(report, null, 2))
    )
  );
}
