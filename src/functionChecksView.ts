/**
 * A custom autograd.Function's extra checks in its card: the second order
 * (the expected Hessian beside autograd's double backward, the finite
 * differences of the gradient and gradgradcheck's verdict) and the function
 * modes (forward mode through the jvp, batched gradients through vmap, and
 * any other mode the record carries, such as undefined gradients).
 *
 * As in the card's main table, the expectation stays in its own column and
 * every observed value carries its shape, dtype and device; a mode that did
 * not apply says why. Each block's comparisons follow it with their verdicts.
 */
import { badge } from './badge';
import { comparisonList } from './comparisonList';
import { el } from './dom';
import {
  formatDeclared,
  formatObserved,
  VALUE_DIGITS,
  formatShape,
  formatTensorMeta,
  formatUndefinedCase,
  shapeOf
} from './format';
import { shownText, trans } from './i18n';
import {
  IBlockObservation,
  ICheckRecord,
  IFunctionMode,
  IModeCase,
  ISecondOrder,
  ITensorObservation,
  JSONValue
} from './types';
import { wordsFor } from './words';

/** The modes in the order the engine runs them; any other mode of the record follows. */
const MODE_ORDER = [
  'forward_ad',
  'batched_grad',
  'batched_forward_grad',
  'undefined_grad'
];

/** The second-order observations in reading order: autograd's (beside the expectation), finite differences, gradgradcheck. */
const SECOND_ORDER_ORDER = [
  'autograd',
  'finite_difference',
  'torch_gradgradcheck'
];

/** The expectation `double_backward`: autograd's own double backward is the reference. */
const DOUBLE_BACKWARD = 'double_backward';

/** The observed tensor of a block observation, wherever the record keeps it. */
function tensorOf(observation: IBlockObservation): ITensorObservation | null {
  for (const key of ['hessian', 'tangent', 'gradients', 'value']) {
    const candidate = observation[key] as ITensorObservation | undefined;
    if (candidate && typeof candidate === 'object' && 'value' in candidate) {
      return candidate;
    }
  }
  return null;
}

/** A note in the muted style, or nothing when it is empty. */
function note(text: string | undefined | null): HTMLElement | null {
  return text
    ? el(
        'div',
        { class: 'jp-gradcheck-meta', testid: 'gradcheck-function-note' },
        text
      )
    : null;
}

/** What a mode or observation adds under its value: the direction of a jvp, the count of grad_outputs. */
function detail(observation: IFunctionMode): string | null {
  if (typeof observation.direction === 'string') {
    return trans.__('direction %1', observation.direction);
  }
  if (typeof observation.grad_outputs === 'number') {
    return trans._n(
      '%1 grad_output at once',
      '%1 grad_outputs at once',
      observation.grad_outputs
    );
  }
  return typeof observation.note === 'string' && observation.note
    ? shownText(observation.note)
    : null;
}

/** The Observation cell: the value with its shape, dtype and device, or the verdict or skip with its reason. */
function observationCell(observation: IFunctionMode): HTMLElement {
  const tensor = tensorOf(observation);
  if (tensor && observation.status !== 'skipped') {
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el(
        'div',
        {
          class: 'jp-gradcheck-value',
          testid: 'gradcheck-function-value',
          title: formatObserved(tensor.value, tensor.dtype)
        },
        formatObserved(tensor.value, tensor.dtype, VALUE_DIGITS)
      ),
      el(
        'div',
        { class: 'jp-gradcheck-meta', testid: 'gradcheck-function-meta' },
        formatTensorMeta(tensor)
      ),
      note(detail(observation))
    );
  }
  const why = note(
    typeof observation.reason === 'string'
      ? shownText(observation.reason)
      : typeof observation.note === 'string'
        ? shownText(observation.note)
        : null
  );
  if (!observation.status) {
    // no value and no verdict: autograd could not give a Hessian, and the note says why
    return el(
      'td',
      { class: 'jp-gradcheck-observation' },
      el('span', { class: 'jp-gradcheck-muted' }, trans.__('not observed')),
      why
    );
  }
  return el(
    'td',
    { class: 'jp-gradcheck-observation' },
    badge(
      observation.status,
      wordsFor('status', observation.status),
      'gradcheck-function-status'
    ),
    why
  );
}

/** The expected Hessian as declared: a matrix with its shape, or what stands in for one. */
function expectationCell(expectation: JSONValue | undefined): HTMLElement {
  let shown: string;
  let meta: string;
  if (expectation === DOUBLE_BACKWARD) {
    shown = trans.__('none declared');
    meta = trans.__("autograd's double backward is the reference");
  } else if (typeof expectation === 'string') {
    shown = expectation === '<callable>' ? trans.__('a callable') : expectation;
    meta = trans.__('declared');
  } else {
    shown = formatDeclared(expectation);
    meta = trans.__('declared · shape %1', formatShape(shapeOf(expectation)));
  }
  return el(
    'td',
    { class: 'jp-gradcheck-expectation' },
    el(
      'div',
      { class: 'jp-gradcheck-value', testid: 'gradcheck-function-expectation' },
      shown
    ),
    el('div', { class: 'jp-gradcheck-meta' }, meta)
  );
}

/** A row: the observation's name in words (and which case, for a mode of several), then its cells. */
function row(
  kind: 'observation' | 'mode',
  code: string,
  cells: HTMLElement[],
  which?: string
): HTMLElement {
  return el(
    'tr',
    { 'data-observation': code, testid: 'gradcheck-function-row' },
    el(
      'th',
      { scope: 'row' },
      wordsFor(kind, code),
      which ? el('div', { class: 'jp-gradcheck-meta' }, which) : null
    ),
    cells
  );
}

/** A case's Observation cell: each input's returned gradient (or None), or the crash with its reason. */
function caseCell(found: IModeCase): HTMLElement {
  if (!found.gradients) {
    return observationCell({ status: found.status, reason: found.reason });
  }
  return el(
    'td',
    { class: 'jp-gradcheck-observation' },
    Object.entries(found.gradients).flatMap(([name, gradient]) =>
      gradient
        ? [
            el(
              'div',
              {
                class: 'jp-gradcheck-value',
                testid: 'gradcheck-function-value',
                title: `${name}: ${formatObserved(gradient.value, gradient.dtype)}`
              },
              `${name}: ${formatObserved(gradient.value, gradient.dtype, VALUE_DIGITS)}`
            ),
            el(
              'div',
              { class: 'jp-gradcheck-meta', testid: 'gradcheck-function-meta' },
              formatTensorMeta(gradient)
            )
          ]
        : el(
            'div',
            { class: 'jp-gradcheck-value', testid: 'gradcheck-function-value' },
            trans.__('%1: None (no gradient)', name)
          )
    )
  );
}

/** A mode's rows: one, or one per case for a mode that runs several. */
function modeRows(key: string, mode: IFunctionMode): HTMLElement[] {
  if (
    !Array.isArray(mode.cases) ||
    !mode.cases.length ||
    mode.status === 'skipped'
  ) {
    return [row('mode', key, [observationCell(mode)])];
  }
  return mode.cases.map(found =>
    row('mode', key, [caseCell(found)], formatUndefinedCase(found.undefined))
  );
}

/** A block: its heading, its table and its comparisons. */
function block(
  testid: string,
  heading: string,
  header: string[],
  rows: HTMLElement[],
  comparisons: HTMLElement | null
): HTMLElement {
  return el(
    'div',
    { class: 'jp-gradcheck-function-block', testid },
    el('h4', {}, heading),
    el(
      'table',
      { class: 'jp-gradcheck-columns jp-gradcheck-function-table' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          header.map(text => el('th', {}, text))
        )
      ),
      el('tbody', {}, rows)
    ),
    comparisons
  );
}

/** The `second_order` block (null when the record has none). */
export function secondOrderBlock(
  secondOrder: ISecondOrder | null | undefined
): HTMLElement | null {
  if (!secondOrder) {
    return null;
  }
  const observations = secondOrder.observations ?? {};
  const keys = [
    ...SECOND_ORDER_ORDER.filter(key => key in observations),
    ...Object.keys(observations).filter(
      key => !SECOND_ORDER_ORDER.includes(key)
    )
  ];
  const rows = keys.map(key => {
    const observation = observations[key];
    const code = observation.name ?? key;
    const expectation =
      key === 'autograd'
        ? expectationCell(secondOrder.expectation)
        : el('td', { class: 'jp-gradcheck-expectation' });
    return row('observation', code, [
      expectation,
      observationCell(observation)
    ]);
  });
  return block(
    'gradcheck-second-order',
    trans.__('Second order: the Hessian of %1', secondOrder.input ?? ''),
    ['', trans.__('Expectation'), trans.__('Observation')],
    rows,
    comparisonList(secondOrder.comparisons, 'gradcheck-function-comparisons')
  );
}

/** The `function_modes` block (null when the record has none or it holds no mode). */
export function functionModesBlock(
  modes: ICheckRecord['function_modes']
): HTMLElement | null {
  if (!modes) {
    return null;
  }
  const isMode = (key: string): boolean => {
    const value = modes[key];
    return (
      !!value &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      'status' in value
    );
  };
  const keys = [
    ...MODE_ORDER.filter(isMode),
    ...Object.keys(modes).filter(
      key => !MODE_ORDER.includes(key) && isMode(key)
    )
  ];
  if (!keys.length) {
    return null;
  }
  const entries = keys.map(key => [key, modes[key] as IFunctionMode] as const);
  return block(
    'gradcheck-function-modes',
    trans.__('Forward mode and batched gradients'),
    ['', trans.__('Observation')],
    entries.flatMap(([key, mode]) => modeRows(key, mode)),
    comparisonList(
      entries.flatMap(([, mode]) => mode.comparisons ?? []),
      'gradcheck-function-comparisons'
    )
  );
}

/** Both blocks of a completed record, as the card shows them (empty for a plain check). */
export function functionChecks(
  record: ICheckRecord | undefined
): HTMLElement[] {
  if (!record?.executed) {
    return [];
  }
  return [
    secondOrderBlock(record.second_order),
    functionModesBlock(record.function_modes)
  ].filter((node): node is HTMLElement => node !== null);
}
