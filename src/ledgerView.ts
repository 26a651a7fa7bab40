/**
 * The rendering of a notebook's checks: one card per check with its verdict,
 * the Expectation column beside the Observation column, the failures that
 * are kept, and the tolerance and expectation history.
 */
import { badge } from './badge';
import { IOutputView, outputViews } from './checkOutputs';
import { comparisonList } from './comparisonList';
import { el, wholeNumbers } from './dom';
import {
  formatDeclared,
  formatDiagnosis,
  formatError,
  formatObserved,
  formatTensorMeta,
  formatTime,
  formatTolerance,
  VALUE_DIGITS,
  formatWhere,
  isComplexValue,
  isStoredValue
} from './format';
import { functionChecks } from './functionChecksView';
import { ICheckView, IHistoryItem, IRunView } from './grouping';
import { shownText, trans } from './i18n';
import { BlobPager, storedValueView } from './storedValueView';
import { ICheckRecord, ITolerance, JSONValue } from './types';
import { wordsFor } from './words';

/** What a check card's buttons do. */
export interface ICheckActions {
  editTolerance(view: ICheckView): void;
  reviseExpectation(view: ICheckView): void;
  /** Reads a page of a stored value's elements; without it, stored values show no "Show values". */
  showValues?: BlobPager;
}

function inputNames(view: ICheckView): string[] {
  const record = view.latest?.record ?? view.declared;
  return Object.keys(record?.inputs ?? {});
}

/**
 * The expectation for one input: its entry in a mapping, or the whole value. A
 * complex value `{real, imag}` is one value, unless the inputs are named so; a
 * stored value `{stored, summary}` is always one value.
 */
function expectedFor(
  analytical: JSONValue | undefined,
  name: string,
  names: string[]
): JSONValue | undefined {
  const complex =
    (isComplexValue(analytical) &&
      !(names.includes('real') && names.includes('imag'))) ||
    isStoredValue(analytical); // one tensor kept by its hash, not a mapping of inputs
  if (
    analytical &&
    typeof analytical === 'object' &&
    !Array.isArray(analytical) &&
    !complex
  ) {
    return (analytical as { [key: string]: JSONValue })[name];
  }
  return names.length === 1 || names[0] === name ? analytical : undefined;
}

function observationCell(
  record: ICheckRecord | undefined,
  output: IOutputView,
  name: string,
  pager?: BlobPager
): HTMLElement {
  const gradient = output.observations?.backward_pass_1?.gradients?.[name];
  if (!record || !record.executed) {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el('span', { class: 'jp-gradcheck-muted' }, trans.__('not observed yet'))
    );
  }
  if (!output.differentiable) {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el(
        'span',
        { class: 'jp-gradcheck-muted' },
        trans.__('not differentiable: not checked')
      )
    );
  }
  const observed = gradient ? gradient.value : record.observed_gradient;
  if (isStoredValue(observed) && (gradient || output.index === null)) {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      storedValueView(observed, pager),
      el(
        'div',
        { class: 'jp-gradcheck-meta', testid: 'gradcheck-observation-meta' },
        gradient
          ? formatTensorMeta(gradient)
          : `${record.dtype ?? ''} · ${record.device ?? ''}`
      )
    );
  }
  if (!gradient) {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el(
        'div',
        {
          testid: 'gradcheck-observation-value',
          class: 'jp-gradcheck-value',
          title:
            output.index === null
              ? formatObserved(record.observed_gradient, record.dtype)
              : undefined
        },
        output.index === null
          ? formatObserved(record.observed_gradient, record.dtype, VALUE_DIGITS)
          : '—'
      ),
      el(
        'div',
        { class: 'jp-gradcheck-meta' },
        `${record.dtype ?? ''} · ${record.device ?? ''}`
      )
    );
  }
  return el(
    'td',
    { class: 'jp-gradcheck-observation' },
    el(
      'div',
      {
        testid: 'gradcheck-observation-value',
        class: 'jp-gradcheck-value',
        title: formatObserved(gradient.value, gradient.dtype)
      },
      formatObserved(gradient.value, gradient.dtype, VALUE_DIGITS)
    ),
    el(
      'div',
      { class: 'jp-gradcheck-meta', testid: 'gradcheck-observation-meta' },
      formatTensorMeta(gradient)
    )
  );
}

/** One row of the main table: an input (of one output, for a multi-output check), expectation beside observation. */
function columnRow(
  view: ICheckView,
  output: IOutputView,
  name: string,
  names: string[],
  pager?: BlobPager
): HTMLElement {
  const index = output.index === null ? null : String(output.index);
  const expected = expectedFor(output.analytical, name, names);
  return el(
    'tr',
    { 'data-input': name, 'data-output': index },
    el(
      'th',
      { scope: 'row' },
      name,
      index === null
        ? null
        : el(
            'div',
            { class: 'jp-gradcheck-meta' },
            trans.__('output %1', index)
          )
    ),
    el(
      'td',
      { class: 'jp-gradcheck-expectation' },
      isStoredValue(expected)
        ? storedValueView(expected, pager)
        : el(
            'div',
            {
              testid: 'gradcheck-expectation-value',
              class: 'jp-gradcheck-value'
            },
            formatDeclared(expected)
          ),
      el(
        'div',
        { class: 'jp-gradcheck-meta' },
        trans.__(
          'declared · %1 · %2',
          view.declared?.dtype ?? 'float64',
          view.declared?.device ?? 'cpu'
        )
      )
    ),
    observationCell(view.latest?.record, output, name, pager)
  );
}

function columns(view: ICheckView, pager?: BlobPager): HTMLElement {
  const names = inputNames(view);
  const shown = names.length ? names : [''];
  const rows = outputViews(view.analytical, view.latest?.record, names).flatMap(
    output => shown.map(name => columnRow(view, output, name, names, pager))
  );
  return el(
    'table',
    { class: 'jp-gradcheck-columns', testid: 'gradcheck-columns' },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', {}, trans.__('input')),
        el('th', {}, trans.__('Expectation')),
        el('th', {}, trans.__('Observation'))
      )
    ),
    el('tbody', {}, rows)
  );
}

/** The inputs as declared: JSON as written, a stored input by its summary (and "Show values"). */
function inputsView(
  inputs: { [name: string]: JSONValue },
  pager?: BlobPager
): HTMLElement {
  const entries = Object.entries(inputs);
  if (!entries.some(([, value]) => isStoredValue(value))) {
    return el('dd', {}, JSON.stringify(inputs));
  }
  return el(
    'dd',
    { testid: 'gradcheck-inputs' },
    entries.map(([name, value]) =>
      el(
        'div',
        { 'data-input': name },
        el('code', {}, `${name}: `),
        isStoredValue(value)
          ? storedValueView(value, pager)
          : JSON.stringify(value)
      )
    )
  );
}

function details(view: ICheckView, pager?: BlobPager): HTMLElement {
  const record = view.latest?.record ?? view.declared;
  const declared = view.declared;
  return el(
    'dl',
    { class: 'jp-gradcheck-details' },
    el('dt', {}, trans.__('inputs')),
    inputsView((record?.inputs ?? {}) as { [name: string]: JSONValue }, pager),
    el('dt', {}, trans.__('tolerance')),
    el(
      'dd',
      {
        testid: 'gradcheck-tolerance',
        title: formatTolerance(view.tolerance as ITolerance, null)
      },
      formatTolerance(view.tolerance as ITolerance)
    ),
    el('dt', {}, trans.__('FD')),
    el(
      'dd',
      {},
      trans.__(
        '%1, step %2',
        declared?.finite_difference?.scheme ?? 'central',
        declared?.finite_difference?.step === undefined ||
          declared?.finite_difference?.step === null
          ? trans.__('dtype default')
          : formatDeclared(declared.finite_difference.step)
      )
    ),
    declared?.origin
      ? [el('dt', {}, trans.__('origin')), el('dd', {}, declared.origin)]
      : null,
    declared?.destination
      ? [
          el('dt', {}, trans.__('destination')),
          el('dd', {}, declared.destination)
        ]
      : null,
    el('dt', {}, trans.__('runs')),
    el('dd', {}, String(view.runs.length))
  );
}

function keptFailure(run: IRunView): HTMLElement {
  const failure = run.record.failure;
  if (run.failedToRun) {
    return el(
      'li',
      {
        class: 'jp-gradcheck-failure',
        testid: 'gradcheck-failure',
        'data-seq': run.seq
      },
      el(
        'div',
        {},
        trans.__('run #%1 %2: failed to run', run.seq, formatTime(run.time))
      ),
      el(
        'div',
        {
          class: 'jp-gradcheck-diagnosis',
          testid: 'gradcheck-diagnosis',
          'data-diagnosis': 'failed_to_run'
        },
        run.failedToRun
      )
    );
  }
  const what = failure?.comparison
    ? wordsFor('comparison', failure.comparison)
    : trans.__('failed');
  return el(
    'li',
    {
      class: 'jp-gradcheck-failure',
      testid: 'gradcheck-failure',
      'data-seq': run.seq
    },
    el(
      'div',
      {},
      failure?.input ||
        (failure?.output !== undefined && failure?.output !== null)
        ? trans.__(
            'run #%1 %2: %3 on %4',
            run.seq,
            formatTime(run.time),
            what,
            formatWhere(failure.input, failure.output)
          )
        : trans.__('run #%1 %2: %3', run.seq, formatTime(run.time), what)
    ),
    // a failure with no values (a backward that cannot be differentiated again) has only its reason
    failure &&
      (failure.left !== undefined || failure.right !== undefined) &&
      (failure.left !== null || failure.right !== null)
      ? el(
          'div',
          {
            class: 'jp-gradcheck-meta',
            title: trans.__(
              'expected %1 vs observed %2 (abs err %3)',
              formatObserved(failure.left, run.record.dtype),
              formatObserved(failure.right, run.record.dtype),
              String(failure.abs_err)
            )
          },
          wholeNumbers(
            trans.__(
              'expected %1 vs observed %2 (abs err %3)',
              formatObserved(failure.left, run.record.dtype, VALUE_DIGITS),
              formatObserved(failure.right, run.record.dtype, VALUE_DIGITS),
              formatError(failure.abs_err)
            )
          )
        )
      : null,
    el(
      'div',
      {
        class: 'jp-gradcheck-diagnosis',
        testid: 'gradcheck-diagnosis',
        'data-diagnosis': failure?.diagnosis ?? ''
      },
      trans.__('diagnosis: %1', formatDiagnosis(failure?.diagnosis)),
      failure?.reason ? ` — ${shownText(failure.reason)}` : ''
    )
  );
}

function historyValue(
  value: JSONValue | ITolerance | undefined,
  kind: string
): string {
  return kind === 'tolerance'
    ? formatTolerance(value as ITolerance)
    : formatDeclared(value as JSONValue);
}

function historyItem(item: IHistoryItem): HTMLElement {
  return el(
    'li',
    {
      class: 'jp-gradcheck-history-item',
      testid: 'gradcheck-history-item',
      'data-kind': item.kind
    },
    el(
      'div',
      {},
      `#${item.seq} ${formatTime(item.time)} ${wordsFor('historyTarget', item.target)}: `,
      `${historyValue(item.before, item.kind)} → ${historyValue(item.after, item.kind)}`,
      item.flags.map(flag =>
        el(
          'span',
          {
            class: 'jp-gradcheck-flag',
            testid: 'gradcheck-flag',
            'data-flag': flag
          },
          wordsFor('historyFlag', flag)
        )
      )
    ),
    el(
      'div',
      {
        class: 'jp-gradcheck-justification',
        testid: 'gradcheck-justification'
      },
      `“${item.justification}”`
    )
  );
}

/** One check's card. */
export function checkCard(
  view: ICheckView,
  actions: ICheckActions
): HTMLElement {
  const declared = view.declared;
  const failedToRun = view.latest?.failedToRun;
  return el(
    'section',
    {
      class: 'jp-gradcheck-check',
      testid: 'gradcheck-check',
      'data-check-id': view.id,
      'data-status': view.status
    },
    el(
      'header',
      { class: 'jp-gradcheck-check-header' },
      badge(view.status),
      detectionFloor(view),
      shadow(view),
      el('span', { class: 'jp-gradcheck-check-id', title: view.id }, view.id),
      el('code', { class: 'jp-gradcheck-function' }, declared?.function ?? '')
    ),
    columns(view, actions.showValues),
    failedToRun
      ? el(
          'div',
          { class: 'jp-gradcheck-field-error' },
          trans.__('failed to run: %1', failedToRun)
        )
      : null,
    comparisonList(view.latest?.record?.comparisons),
    functionChecks(view.latest?.record),
    details(view, actions.showValues),
    view.failuresKept.length
      ? el(
          'div',
          { class: 'jp-gradcheck-failures' },
          el(
            'h4',
            {},
            trans.__('Failures kept (%1)', view.failuresKept.length)
          ),
          el(
            'ul',
            { testid: 'gradcheck-failures' },
            view.failuresKept.map(keptFailure)
          )
        )
      : null,
    view.history.length
      ? el(
          'div',
          { class: 'jp-gradcheck-history' },
          el('h4', {}, trans.__('Tolerance and expectation history')),
          el(
            'ul',
            { testid: 'gradcheck-history' },
            view.history.map(historyItem)
          )
        )
      : null,
    el(
      'div',
      { class: 'jp-gradcheck-check-actions' },
      button(trans.__('Edit tolerance…'), 'gradcheck-edit-tolerance', () =>
        actions.editTolerance(view)
      ),
      button(
        trans.__('Revise expectation…'),
        'gradcheck-revise-expectation',
        () => actions.reviseExpectation(view)
      )
    )
  );
}

/** A panel button with a stable test id. */
export function button(
  label: string,
  testid: string,
  onClick: () => void
): HTMLButtonElement {
  const node = el(
    'button',
    { type: 'button', class: 'jp-mod-styled jp-gradcheck-button', testid },
    label
  );
  node.addEventListener('click', onClick);
  return node;
}

/**
 * Beside "passed", in a low precision: the relative one-element error the check was blind below
 * (the record's detection_floor), so a pass does not read as a guarantee it is not.
 */
/** The float64 shadow of a low-precision check: whether it passed, or why it could not run, its reason as the title. */
function shadow(view: ICheckView): HTMLElement | null {
  const block = view.latest?.record?.float64_shadow;
  if (!block) {
    return null;
  }
  const shown =
    block.status === 'not_run'
      ? trans.__('no %1 shadow', block.dtype)
      : block.passed
        ? trans.__('%1 shadow passed', block.dtype)
        : trans.__('%1 shadow failed', block.dtype);
  return el(
    'span',
    {
      class: 'jp-gradcheck-floor',
      testid: 'gradcheck-float64-shadow',
      title: block.reason ? shownText(block.reason) : ''
    },
    shown
  );
}

function detectionFloor(view: ICheckView): HTMLElement | null {
  const floor = view.latest?.record?.detection_floor;
  if (view.status !== 'passed' || !floor) {
    return null;
  }
  return el(
    'span',
    {
      class: 'jp-gradcheck-floor',
      testid: 'gradcheck-detection-floor',
      title: floor.reason ? shownText(floor.reason) : ''
    },
    trans.__(
      'blind below %1 relative error (%2)',
      floor.relative.toPrecision(2),
      view.latest?.record?.dtype ?? ''
    )
  );
}
