/**
 * The right-sidebar panel. It follows the active notebook, shows that
 * notebook's ledger grouped by check, declares and runs new checks, and
 * keeps the notebook's `metadata.gradcheck` binding current after each of
 * its own actions. Everything goes through the server extension's REST API.
 */
import { showErrorMessage } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import * as api from './api';
import { applyBinding, basename, bindingFromLedger } from './binding';
import { DeclareForm } from './declareForm';
import { editToleranceDialog, reviseExpectationDialog } from './dialogs';
import { append, el, replaceChildren } from './dom';
import { ICheckView, groupByCheck } from './grouping';
import { gradcheckIcon } from './icon';
import { badge, button, checkCard } from './ledgerView';
import { FALLBACK_DEFAULTS, IDefaults } from './settings';
import { ILedgerAnswer, IServerStatus } from './types';
import { buildCheck, fieldForError } from './validation';
import { summariseVerify } from './verifyReport';

/** The panel's stable id, used by the shell and by the UI tests. */
export const PANEL_ID = 'jupyterlab-gradcheck:panel';

/** The command that enables the server extension when the handshake fails. */
export const ENABLE_COMMAND = 'jupyter server extension enable jupyterlab_gradcheck';

/** The side panel. */
export class GradcheckPanel extends Widget {
  private readonly tracker: INotebookTracker;
  private readonly form: DeclareForm;
  private readonly header: HTMLElement;
  private readonly problem: HTMLElement;
  private readonly body: HTMLElement;
  private readonly checks: HTMLElement;
  private readonly verifyResult: HTMLElement;
  private readonly notice: HTMLElement;
  private readonly formatSelect: HTMLSelectElement;
  private defaults: IDefaults = FALLBACK_DEFAULTS;
  private status: IServerStatus | null = null;
  private ledger: ILedgerAnswer | null = null;
  private views: ICheckView[] = [];
  private refreshing: Promise<void> = Promise.resolve();
  private watched: NotebookPanel | null = null;

  constructor(tracker: INotebookTracker) {
    super();
    this.id = PANEL_ID;
    this.tracker = tracker;
    this.addClass('jp-gradcheck-panel');
    this.title.icon = gradcheckIcon;
    this.title.caption = 'Gradient check: expectations, observations and the ledger';
    this.node.dataset.testid = 'gradcheck-panel';

    this.form = new DeclareForm(() => void this.run());
    this.header = el('div', { class: 'jp-gradcheck-header', testid: 'gradcheck-header' });
    this.problem = el('div', { class: 'jp-gradcheck-problem', testid: 'gradcheck-server-problem', hidden: true });
    this.checks = el('div', { class: 'jp-gradcheck-checks', testid: 'gradcheck-checks' });
    this.verifyResult = el('div', { class: 'jp-gradcheck-verify-result', testid: 'gradcheck-verify-result' });
    this.notice = el('div', { class: 'jp-gradcheck-field-error', testid: 'gradcheck-notice', role: 'status' });
    this.formatSelect = el('select', { class: 'jp-mod-styled', testid: 'gradcheck-export-format' }, api.EXPORT_FORMATS.map(f => el('option', { value: f }, f.toUpperCase())));
    this.body = el(
      'div',
      { class: 'jp-gradcheck-body' },
      el('details', { class: 'jp-gradcheck-section', open: true }, el('summary', {}, 'Declare a check'), this.form.node),
      el(
        'div',
        { class: 'jp-gradcheck-section jp-gradcheck-ledger-actions' },
        this.formatSelect,
        button('Export', 'gradcheck-export', () => void this.exportLedger(this.formatSelect.value as api.ExportFormat)),
        button('Verify', 'gradcheck-verify', () => void this.verify()),
        button('Refresh', 'gradcheck-refresh', () => void this.refresh()),
        this.verifyResult
      ),
      this.notice,
      this.checks
    );
    append(this.node, this.header, this.problem, this.body);

    tracker.currentChanged.connect(this.onNotebookChanged, this);
    this.watch(tracker.currentWidget);
  }

  /** The active notebook's server-relative path, or null. */
  get notebookPath(): string | null {
    const notebook = this.tracker.currentWidget;
    return notebook ? notebook.context.localPath : null;
  }

  /** Take new defaults from the settings. */
  setDefaults(defaults: IDefaults): void {
    this.defaults = defaults;
    this.form.applyDefaults(defaults);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.refresh();
  }

  private onNotebookChanged(): void {
    this.watch(this.tracker.currentWidget);
    this.verifyResult.textContent = '';
    void this.refresh();
  }

  /** Refresh when the active notebook is renamed, too. */
  private watch(notebook: NotebookPanel | null): void {
    if (this.watched) {
      this.watched.context.pathChanged.disconnect(this.onPathChanged, this);
    }
    this.watched = notebook;
    notebook?.context.pathChanged.connect(this.onPathChanged, this);
  }

  private onPathChanged(): void {
    void this.refresh();
  }

  /** The version handshake; true when the server extension answered. */
  private async handshake(): Promise<boolean> {
    if (this.status) {
      return true;
    }
    try {
      this.status = await api.getStatus();
      this.problem.hidden = true;
      this.body.hidden = false;
      this.form.setDevices(this.status.devices, this.defaults.device, this.status.error ?? null);
      this.form.applyDefaults(this.defaults);
      return true;
    } catch (error) {
      this.showMissingExtension(error as Error);
      return false;
    }
  }

  private showMissingExtension(error: Error): void {
    this.body.hidden = true;
    this.problem.hidden = false;
    replaceChildren(
      this.problem,
      el('p', { class: 'jp-gradcheck-problem-title' }, 'The server extension is not installed or not enabled.'),
      el('p', {}, 'The panel needs the jupyterlab_gradcheck server extension to run and record checks. Enable it, then restart JupyterLab:'),
      el('pre', { testid: 'gradcheck-fix-command' }, ENABLE_COMMAND),
      el('p', { class: 'jp-gradcheck-meta' }, `(${error.message})`),
      button('Try again', 'gradcheck-retry', () => void this.refresh())
    );
  }

  /**
   * Reload status and the active notebook's ledger. Reloads run one after the
   * other, and each call waits for a reload that started after it, so what an
   * action wrote is always in the ledger the panel binds to.
   */
  refresh(): Promise<void> {
    const next = this.refreshing.then(() => this.reload());
    this.refreshing = next.catch(() => undefined);
    return next;
  }

  private async reload(): Promise<void> {
    const path = this.notebookPath;
    this.renderHeader(path);
    if (!(await this.handshake())) {
      return;
    }
    if (!path) {
      this.ledger = null;
      this.views = [];
      replaceChildren(this.checks, el('p', { class: 'jp-gradcheck-muted', testid: 'gradcheck-no-notebook' }, 'Open a notebook to see and declare its gradient checks.'));
      return;
    }
    try {
      const ledger = await api.getLedger(path);
      if (path !== this.notebookPath) {
        return;
      }
      this.ledger = ledger;
      this.views = Array.isArray(ledger.entries) ? groupByCheck(ledger.entries) : [];
    } catch (error) {
      this.ledger = null;
      this.views = [];
      replaceChildren(this.checks, el('div', { class: 'jp-gradcheck-field-error' }, `Could not read the ledger: ${(error as Error).message}`));
      this.renderHeader(path);
      return;
    }
    this.renderHeader(path);
    this.renderChecks();
  }

  private renderHeader(path: string | null): void {
    const chain = this.ledger?.chain;
    const entries = this.ledger && Array.isArray(this.ledger.entries) ? this.ledger.entries.length : 0;
    replaceChildren(
      this.header,
      el('div', { class: 'jp-gradcheck-title' }, 'Gradient check'),
      el('div', { class: 'jp-gradcheck-notebook', testid: 'gradcheck-notebook', title: path ?? '' }, path ? basename(path) : 'no notebook'),
      this.ledger
        ? el(
            'div',
            { class: 'jp-gradcheck-chain', testid: 'gradcheck-chain' },
            chainBadge(chain, entries),
            chain?.binding_ok === false ? badge('failed', 'binding broken') : null,
            el('span', { class: 'jp-gradcheck-meta' }, ` ${entries} entries`)
          )
        : null
    );
  }

  private renderChecks(): void {
    if (!this.views.length) {
      replaceChildren(this.checks, el('p', { class: 'jp-gradcheck-muted', testid: 'gradcheck-empty' }, 'No checks yet. Write the expectation first, then run.'));
      return;
    }
    const actions = {
      editTolerance: (view: ICheckView) => void this.editTolerance(view),
      reviseExpectation: (view: ICheckView) => void this.reviseExpectation(view)
    };
    replaceChildren(this.checks, [...this.views].reverse().map(view => checkCard(view, actions)));
  }

  /** After an action: reload, then bind the notebook to the ledger it changed. */
  private async afterAction(): Promise<void> {
    await this.refresh();
    const notebook = this.tracker.currentWidget;
    if (!notebook?.model || !this.ledger) {
      return;
    }
    if (this.ledger.chain && this.ledger.chain.ok === false) {
      // Rebinding to a broken chain, or over a binding the ledger no longer matches,
      // would hide the break from `verify`.
      this.notice.textContent =
        'The notebook binding was not updated: the ledger does not verify. Press Verify to see why.';
      return;
    }
    this.notice.textContent = '';
    applyBinding(notebook.model, bindingFromLedger(this.ledger));
  }

  /** Validate the form, send `POST checks`, and show the outcome. */
  async run(): Promise<void> {
    const path = this.notebookPath;
    if (!path) {
      this.form.showErrors({ '': 'open a notebook first: checks are recorded in its ledger' });
      return;
    }
    const built = buildCheck(this.form.values(), this.status?.devices ?? []);
    if (!built.ok) {
      this.form.showErrors(built.errors);
      return;
    }
    this.form.clearErrors();
    this.form.setBusy(true);
    try {
      await api.runCheck(path, built.value);
    } catch (error) {
      if (error instanceof api.GradcheckRequestError) {
        const inputs = Object.keys(built.value.inputs ?? {});
        this.form.showErrors({ [fieldForError(error.field, inputs)]: error.message });
      } else {
        this.form.showErrors({ '': (error as Error).message });
      }
    } finally {
      this.form.setBusy(false);
      await this.afterAction();
    }
  }

  /** Open an edit dialog for the active notebook's check; reload and rebind when it changed something. */
  private async edit(dialog: (notebook: string) => Promise<boolean>): Promise<void> {
    const notebook = this.notebookPath;
    if (notebook && (await dialog(notebook))) {
      await this.afterAction();
    }
  }

  private editTolerance(view: ICheckView): Promise<void> {
    return this.edit(notebook =>
      editToleranceDialog(view, async edit => {
        await api.changeTolerance({ notebook, check_id: view.id, ...edit });
      })
    );
  }

  private reviseExpectation(view: ICheckView): Promise<void> {
    return this.edit(notebook =>
      reviseExpectationDialog(view, async edit => {
        await api.changeExpectation({ notebook, check_id: view.id, ...edit });
      })
    );
  }

  /** Download the active notebook's ledger export as a file. */
  async exportLedger(format: api.ExportFormat): Promise<void> {
    const path = this.notebookPath;
    if (!path) {
      await showErrorMessage('Export ledger', 'Open a notebook first: its ledger is what is exported.');
      return;
    }
    try {
      const blob = await api.exportLedger(path, format);
      const stem = basename(path).replace(/\.ipynb$/, '');
      const url = URL.createObjectURL(blob);
      const link = el('a', { href: url, download: `${stem}.gradcheck.${format}`, hidden: true });
      document.body.appendChild(link);
      link.click();
      link.remove();
      window.setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (error) {
      await showErrorMessage('Export ledger', (error as Error).message);
    }
    await this.refresh();
  }

  /** Save the notebook (so its binding is on disk), then `POST verify` and show the report. */
  async verify(): Promise<void> {
    const notebook = this.tracker.currentWidget;
    const path = this.notebookPath;
    if (!notebook || !path) {
      replaceChildren(this.verifyResult, 'Open a notebook first: its ledger is what is verified.');
      return;
    }
    replaceChildren(this.verifyResult, 'Verifying…');
    try {
      if (notebook.model?.dirty) {
        await notebook.context.save();
      }
      const report = await api.verifyLedger(path, false);
      replaceChildren(this.verifyResult, verifyReport(report));
    } catch (error) {
      replaceChildren(this.verifyResult, el('div', { class: 'jp-gradcheck-field-error' }, `Verify failed: ${(error as Error).message}`));
    }
    await this.refresh();
  }
}

function chainBadge(chain: ILedgerAnswer['chain'], entries: number): HTMLElement {
  if (!entries) {
    return badge('not_run', 'empty ledger');
  }
  const ok = chain?.chain_ok ?? chain?.ok;
  if (typeof ok !== 'boolean') {
    return badge('not_run', 'chain unknown');
  }
  const node = badge(ok ? 'passed' : 'failed', ok ? 'chain OK' : 'chain broken');

  node.dataset.testid = 'gradcheck-chain-badge';
  return node;
}

/** A verify report as a verdict badge and its lines. */
function verifyReport(report: { [key: string]: unknown }): HTMLElement {
  const summary = summariseVerify(report);
  return el(
    'div',
    { testid: 'gradcheck-verify-report', 'data-ok': String(summary.ok) },
    badge(summary.ok ? 'passed' : 'failed', summary.ok ? 'verified' : 'verification failed'),
    el(
      'ul',
      { class: 'jp-gradcheck-verify-lines' },
      summary.lines.map(line => el('li', { class: `jp-gradcheck-verify-${line.level}`, 'data-level': line.level }, line.text))
    ),
    el('details', {}, el('summary', {}, 'full report'), el('pre', {}, JSON.stringify(report, null, 2)))
  );
}
