/**
 * The rendering of a notebook's checks: one card per check with its verdict,
 * the Expectation column beside the Observation column, the failures that
 * are kept, and the tolerance and expectation history.
 */
import { el } from './dom';
import {
  formatDeclared,
  formatDiagnosis,
  formatError,
  formatObserved,
  formatTensorMeta,
  formatTime,
  formatTolerance
} from './format';
import { ICheckView, IHistoryItem, IRunView } from './grouping';
import { ICheckRecord, ITolerance, JSONValue } from './types';

/** What a check card's buttons do. */
export interface ICheckActions {
  editTolerance(view: ICheckView): void;
  reviseExpectation(view: ICheckView): void;
}

const STATUS_TEXT: { [status: string]: string } = {
  passed: 'passed',
  failed: 'failed',
  not_run: 'not run',
  failed_to_run: 'failed to run'
};

/** A verdict badge; its text is the verdict so it reads without colour. */
export function badge(status: string, text = STATUS_TEXT[status] ?? status): HTMLElement {
  return el('span', { class: `jp-gradcheck-badge jp-gradcheck-badge-${status}`, testid: 'gradcheck-badge', 'data-status': status }, text);
}

function inputNames(view: ICheckView): string[] {
  const record = view.latest?.record ?? view.declared;
  return Object.keys(record?.inputs ?? {});
}

/** The expectation for one input: its entry in a mapping, or the whole value. */
function expectedFor(analytical: JSONValue | undefined, name: string, names: string[]): JSONValue | undefined {
  if (analytical && typeof analytical === 'object' && !Array.isArray(analytical)) {
    return (analytical as { [key: string]: JSONValue })[name];
  }
  return names.length === 1 || names[0] === name ? analytical : undefined;
}

function observationCell(record: ICheckRecord | undefined, name: string): HTMLElement {
  const gradient = record?.observations?.backward_pass_1?.gradients?.[name];
  if (!record || !record.executed) {
    return el('td', { class: 'jp-gradcheck-observation' }, el('span', { class: 'jp-gradcheck-muted' }, 'not observed yet'));
  }
  if (!gradient) {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el('div', { testid: 'gradcheck-observation-value' }, formatObserved(record.observed_gradient, record.dtype)),
      el('div', { class: 'jp-gradcheck-meta' }, `${record.dtype ?? ''} · ${record.device ?? ''}`)
    );
  }
  return el(
    'td',
    { class: 'jp-gradcheck-observation' },
    el('div', { testid: 'gradcheck-observation-value', class: 'jp-gradcheck-value' }, formatObserved(gradient.value, gradient.dtype)),
    el('div', { class: 'jp-gradcheck-meta', testid: 'gradcheck-observation-meta' }, formatTensorMeta(gradient))
  );
}

function columns(view: ICheckView): HTMLElement {
  const names = inputNames(view);
  const record = view.latest?.record;
  const rows = (names.length ? names : ['']).map(name =>
    el(
      'tr',
      { 'data-input': name },
      el('th', { scope: 'row' }, name),
      el(
        'td',
        { class: 'jp-gradcheck-expectation' },
        el('div', { testid: 'gradcheck-expectation-value', class: 'jp-gradcheck-value' }, formatDeclared(expectedFor(view.analytical, name, names))),
        el('div', { class: 'jp-gradcheck-meta' }, `declared · ${view.declared?.dtype ?? 'float64'} · ${view.declared?.device ?? 'cpu'}`)
      ),
      observationCell(record, name)
    )
  );
  return el(
    'table',
    { class: 'jp-gradcheck-columns', testid: 'gradcheck-columns' },
    el('thead', {}, el('tr', {}, el('th', {}, 'input'), el('th', {}, 'Expectation'), el('th', {}, 'Observation'))),
    el('tbody', {}, rows)
  );
}

function details(view: ICheckView): HTMLElement {
  const record = view.latest?.record ?? view.declared;
  const declared = view.declared;
  return el(
    'dl',
    { class: 'jp-gradcheck-details' },
    el('dt', {}, 'inputs'),
    el('dd', {}, JSON.stringify(record?.inputs ?? {})),
    el('dt', {}, 'tolerance'),
    el('dd', { testid: 'gradcheck-tolerance' }, formatTolerance(view.tolerance as ITolerance)),
    el('dt', {}, 'FD'),
    el('dd', {}, `${declared?.finite_difference?.scheme ?? 'central'}, step ${formatDeclared(declared?.finite_difference?.step ?? 'dtype default')}`),
    declared?.origin ? [el('dt', {}, 'origin'), el('dd', {}, declared.origin)] : null,
    declared?.destination ? [el('dt', {}, 'destination'), el('dd', {}, declared.destination)] : null,
    el('dt', {}, 'runs'),
    el('dd', {}, String(view.runs.length))
  );
}

function comparisons(record: ICheckRecord | undefined): HTMLElement | null {
  if (!record?.comparisons?.length) {
    return null;
  }
  return el(
    'ul',
    { class: 'jp-gradcheck-comparisons', testid: 'gradcheck-comparisons' },
    record.comparisons.map(c =>
      el(
        'li',
        { class: c.passed ? '' : 'jp-gradcheck-failed-line', 'data-passed': String(c.passed) },
        `${c.name.replace(/_/g, ' ')}${c.input ? ` (${c.input})` : ''}: max abs err ${formatError(c.max_abs_err)}, max rel err ${formatError(c.max_rel_err)} — ${c.passed ? 'ok' : 'FAILED'}`
      )
    )
  );
}

function keptFailure(run: IRunView): HTMLElement {
  const failure = run.record.failure;
  if (run.failedToRun) {
    return el(
      'li',
      { class: 'jp-gradcheck-failure', testid: 'gradcheck-failure', 'data-seq': run.seq },
      el('div', {}, `run #${run.seq} ${formatTime(run.time)}: failed to run`),
      el('div', { class: 'jp-gradcheck-diagnosis', testid: 'gradcheck-diagnosis', 'data-diagnosis': 'failed_to_run' }, run.failedToRun)
    );
  }
  return el(
    'li',
    { class: 'jp-gradcheck-failure', testid: 'gradcheck-failure', 'data-seq': run.seq },
    el('div', {}, `run #${run.seq} ${formatTime(run.time)}: ${failure?.comparison?.replace(/_/g, ' ') ?? 'failed'}${failure?.input ? ` on ${failure.input}` : ''}`),
    failure
      ? el(
          'div',
          { class: 'jp-gradcheck-meta' },
          `expected ${formatObserved(failure.left, run.record.dtype)} vs observed ${formatObserved(failure.right, run.record.dtype)} (abs err ${formatError(failure.abs_err)})`
        )
      : null,
    el(
      'div',
      { class: 'jp-gradcheck-diagnosis', testid: 'gradcheck-diagnosis', 'data-diagnosis': failure?.diagnosis ?? '' },
      `diagnosis: ${formatDiagnosis(failure?.diagnosis)}`,
      failure?.reason ? ` — ${failure.reason}` : ''
    )
  );
}

const HISTORY_LABEL: { [target: string]: string } = {
  tolerance: 'tolerance',
  finite_difference: 'finite-difference tolerance',
  analytical_gradient: 'expectation'
};

function historyValue(value: JSONValue | ITolerance | undefined, kind: string): string {
  return kind === 'tolerance' ? formatTolerance(value as ITolerance) : formatDeclared(value as JSONValue);
}

function historyItem(item: IHistoryItem): HTMLElement {
  return el(
    'li',
    { class: 'jp-gradcheck-history-item', testid: 'gradcheck-history-item', 'data-kind': item.kind },
    el(
      'div',
      {},
      `#${item.seq} ${formatTime(item.time)} ${HISTORY_LABEL[item.target] ?? item.target}: `,
      `${historyValue(item.before, item.kind)} → ${historyValue(item.after, item.kind)}`,
      item.flags.map(flag => el('span', { class: 'jp-gradcheck-flag', testid: 'gradcheck-flag' }, flag))
    ),
    el('div', { class: 'jp-gradcheck-justification', testid: 'gradcheck-justification' }, `“${item.justification}”`)
  );
}

/** One check's card. */
export function checkCard(view: ICheckView, actions: ICheckActions): HTMLElement {
  const declared = view.declared;
  const failedToRun = view.latest?.failedToRun;
  return el(
    'section',
    { class: 'jp-gradcheck-check', testid: 'gradcheck-check', 'data-check-id': view.id, 'data-status': view.status },
    el(
      'header',
      { class: 'jp-gradcheck-check-header' },
      badge(view.status),
      el('span', { class: 'jp-gradcheck-check-id', title: view.id }, view.id),
      el('code', { class: 'jp-gradcheck-function' }, declared?.function ?? '')
    ),
    columns(view),
    failedToRun ? el('div', { class: 'jp-gradcheck-field-error' }, `failed to run: ${failedToRun}`) : null,
    comparisons(view.latest?.record),
    details(view),
    view.failuresKept.length
      ? el(
          'div',
          { class: 'jp-gradcheck-failures' },
          el('h4', {}, `Failures kept (${view.failuresKept.length})`),
          el('ul', { testid: 'gradcheck-failures' }, view.failuresKept.map(keptFailure))
        )
      : null,
    view.history.length
      ? el(
          'div',
          { class: 'jp-gradcheck-history' },
          el('h4', {}, 'Tolerance and expectation history'),
          el('ul', { testid: 'gradcheck-history' }, view.history.map(historyItem))
        )
      : null,
    el(
      'div',
      { class: 'jp-gradcheck-check-actions' },
      button('Edit tolerance…', 'gradcheck-edit-tolerance', () => actions.editTolerance(view)),
      button('Revise expectation…', 'gradcheck-revise-expectation', () => actions.reviseExpectation(view))
    )
  );
}

/** A panel button with a stable test id. */
export function button(label: string, testid: string, onClick: () => void): HTMLButtonElement {
  const node = el('button', { type: 'button', class: 'jp-mod-styled jp-gradcheck-button', testid }, label);
  node.addEventListener('click', onClick);
  return node;
}
