/**
 * @jest-environment jsdom
 *
 * A custom autograd.Function's second order, forward mode and batched
 * gradients in its check card, rendered from ledger entries the Python API
 * really wrote (fixtures/function-checks.json, made by
 * scripts/function_checks_fixture.py): each observation with its value,
 * shape, dtype and device, each comparison with its verdict, a skip with its
 * reason, and the rows of a multi-output check naming their output.
 */
/// <reference types="node" />
import * as fs from 'fs';
import * as path from 'path';

import { groupByCheck } from '../grouping';
import { useTranslator } from '../i18n';
import { checkCard } from '../ledgerView';
import { ICheckRecord, ILedgerEntry } from '../types';
import { checkEntries } from './fakes';
import { spanish } from './spanishTranslator';

/** The real ledger entries: three checks, an expectation and an observation each. */
function fixture(): ILedgerEntry[] {
  const file = path.join(__dirname, 'fixtures', 'function-checks.json');
  return JSON.parse(fs.readFileSync(file, 'utf-8')) as ILedgerEntry[];
}

const noop = { editTolerance: () => undefined, reviseExpectation: () => undefined };

/** The card of check `id`, its latest record changed by `edit` first when given. */
function card(id: string, edit?: (record: ICheckRecord) => void): HTMLElement {
  const entries = fixture();
  if (edit) {
    const observation = entries.filter(e => e.check_id === id && e.kind === 'observation').pop()!;
    edit(observation.data.record as ICheckRecord);
  }
  const view = groupByCheck(entries).find(v => v.id === id);
  expect(view).toBeDefined();
  return checkCard(view!, noop);
}

function texts(root: Element, selector: string): string[] {
  return Array.from(root.querySelectorAll(selector)).map(n => n.textContent ?? '');
}

/** Each row of a block: [name, ...cells], the cells' text as shown. */
function rows(block: Element): string[][] {
  return Array.from(block.querySelectorAll('tbody tr')).map(tr => texts(tr, 'th, td'));
}

/** Each comparison line of a block: [code, passed]. */
function verdicts(block: Element): [string, string][] {
  return Array.from(block.querySelectorAll('[data-testid="gradcheck-function-comparisons"] li')).map(li => [
    (li as HTMLElement).dataset.comparison ?? '',
    (li as HTMLElement).dataset.passed ?? ''
  ]);
}

function block(root: Element, testid: string): Element {
  const node = root.querySelector(`[data-testid="${testid}"]`);
  expect(node).not.toBeNull();
  return node!;
}

afterEach(() => useTranslator(null));

describe('the second order in a check card', () => {
  it('puts the declared Hessian beside autograd, then finite differences and gradgradcheck, each with shape, dtype and device', () => {
    // Given a Function with a jvp checked with hessian=torch.diag(6 * x) at x = [1, 2]
    const root = card('cube_jvp_hessian');
    const secondOrder = block(root, 'gradcheck-second-order');
    // Then the block names the input and reads expectation | observation, row by row
    expect(texts(secondOrder, 'h4')).toEqual(['Second order: the Hessian of x']);
    expect(texts(secondOrder, 'thead th')).toEqual(['', 'Expectation', 'Observation']);
    expect(rows(secondOrder)).toEqual([
      [
        'autograd double backward',
        '[[6,0],[0,12]]declared · shape [2, 2]',
        '[[6.0, 0.0], [0.0, 12.0]]shape [2, 2] · float64 · cpu'
      ],
      // the finite differences of the gradient, exactly as recorded (JSON numbers are doubles)
      ['finite differences of the gradient', '', '[[5.999999999981665, 0.0], [0.0, 11.99999999996333]]shape [2, 2] · float64 · cpu'],
      ['torch gradgradcheck', '', 'passedgradgradcheck passed']
    ]);
    expect(texts(secondOrder, '[data-testid="gradcheck-function-status"]')).toEqual(['passed']);
    // And both Hessian comparisons follow with their verdicts and errors
    expect(verdicts(secondOrder)).toEqual([
      ['hessian_analytical_vs_autograd', 'true'],
      ['hessian_autograd_vs_finite_difference', 'true']
    ]);
    expect(texts(secondOrder, '[data-testid="gradcheck-function-comparisons"] li')[1]).toBe(
      'autograd double backward vs finite differences of the gradient (x): max abs err 3.67e-11, max rel err 3.06e-12 — ok'
    );
  });

  it('says the double backward is the reference when no Hessian was declared', () => {
    // Given an old-style Function checked with hessian="double_backward"
    const secondOrder = block(card('cube_double_backward'), 'gradcheck-second-order');
    // Then no matrix is invented for the expectation, and only autograd vs finite differences is compared
    expect(rows(secondOrder)[0].slice(0, 2)).toEqual(['autograd double backward', "none declaredautograd's double backward is the reference"]);
    expect(verdicts(secondOrder)).toEqual([['hessian_autograd_vs_finite_difference', 'true']]);
  });
});

describe('forward mode and batched gradients in a check card', () => {
  it('shows the tangent and the batched gradients with shape, dtype and device, and their three comparisons', () => {
    const modes = block(card('cube_jvp_hessian'), 'gradcheck-function-modes');
    expect(texts(modes, 'thead th')).toEqual(['', 'Observation']);
    expect(rows(modes)).toEqual([
      ['forward mode (jvp)', '-1.4369703579225677shape [] scalar · float64 · cpudirection u: standard normal, seed 17'],
      [
        'batched gradients (vmap)',
        '[[-4.240539404620989, -16.962157618483957], [0.7008922616746054, 2.8035690466984216], [0.10209955242938432, 0.40839820971753726]]' +
          'shape [3, 2] · float64 · cpu3 grad_outputs at once'
      ]
    ]);
    expect(verdicts(modes)).toEqual([
      ['forward_ad_vs_finite_difference', 'true'],
      ['forward_ad_vs_backward', 'true'],
      ['batched_grad_vs_one_at_a_time', 'true']
    ]);
  });

  it("shows a skipped forward mode with PyTorch's reason, and the batched gradients still observed", () => {
    // Given an old-style Function with no jvp
    const modes = block(card('cube_double_backward'), 'gradcheck-function-modes');
    const [forward, batched] = Array.from(modes.querySelectorAll('tbody tr')) as HTMLElement[];
    // Then forward mode is marked skipped, with the reason, and no value
    expect(forward.dataset.observation).toBe('forward_ad');
    expect((forward.querySelector('[data-testid="gradcheck-function-status"]') as HTMLElement).dataset.status).toBe('skipped');
    expect(texts(forward, '[data-testid="gradcheck-function-note"]')[0]).toContain('You must implement the jvp function');
    expect(forward.querySelector('[data-testid="gradcheck-function-value"]')).toBeNull();
    expect(texts(batched, '[data-testid="gradcheck-function-meta"]')).toEqual(['shape [3, 2] · float64 · cpu']);
  });

  it('marks the failed forward-mode comparisons and keeps the failure, the card failed', () => {
    // Given a Function whose jvp is off by 1 %
    const root = card('cube_jvp_wrong');
    const modes = block(root, 'gradcheck-function-modes');
    // Then both forward-mode comparisons say FAILED, the batched one ok
    expect(verdicts(modes)).toEqual([
      ['forward_ad_vs_finite_difference', 'false'],
      ['forward_ad_vs_backward', 'false'],
      ['batched_grad_vs_one_at_a_time', 'true']
    ]);
    expect(texts(modes, '.jp-gradcheck-failed-line')[0]).toMatch(/^forward mode vs finite differences along u \(x\): max abs err 0\.0144, .* — FAILED$/);
    // And the card's one verdict badge says failed, and the kept failure names the forward mode
    expect(texts(root, '[data-testid="gradcheck-badge"]')).toEqual(['failed']);
    expect(texts(root, '[data-testid="gradcheck-failure"] > div:first-child')[0]).toMatch(/: forward mode vs finite differences along u on x$/);
    // And no second-order block is invented for a check that asked for none
    expect(root.querySelector('[data-testid="gradcheck-second-order"]')).toBeNull();
  });

  it('renders the undefined-gradient cases (core/check/undefined_grad.py) with each returned gradient, or the crash', () => {
    // Given the record with an undefined_grad mode in the engine's shape: every grad_output undefined,
    // then output 1 alone; the second case crashed; and a mode the panel has no words for yet
    const root = card('cube_jvp_hessian', record => {
      const modes = record.function_modes!;
      modes.undefined_grad = {
        status: 'observed',
        cases: [
          { undefined: 'all', status: 'returned', gradients: { x: { value: [0, 0], shape: [2], dtype: 'float64', device: 'cpu' } } },
          { undefined: [1], status: 'crashed', reason: 'TypeError: unsupported operand' }
        ],
        comparisons: [{ name: 'undefined_grad_vs_zero', input: 'x', max_abs_err: 0, max_rel_err: 0, passed: true }]
      };
      modes.some_later_mode = { status: 'skipped', reason: 'not applicable here' };
    });
    const modes = block(root, 'gradcheck-function-modes');
    // Then each case has its own row saying which grad_outputs were undefined, with the returned
    // gradient's value, shape, dtype and device or the crash and its reason; the unknown mode shows its skip
    expect(rows(modes).slice(2)).toEqual([
      ['undefined gradientsevery grad_output undefined', 'x: [0.0, 0.0]shape [2] · float64 · cpu'],
      ['undefined gradientsgrad_output 1 undefined, the others zero', 'crashedTypeError: unsupported operand'],
      ['some later mode', 'skippednot applicable here']
    ]);
    expect(verdicts(modes)[3]).toEqual(['undefined_grad_vs_zero', 'true']);
    expect(texts(modes, 'li')[3]).toMatch(/^gradient with undefined grad_outputs vs zero \(x\): max abs err 0, /);
  });

  it('shows nothing of the kind for a plain expression check', () => {
    const plain = checkCard(groupByCheck(checkEntries(1, 'x*x@b1', true))[0], noop);
    expect(plain.querySelector('.jp-gradcheck-function-block')).toBeNull();
  });
});

describe('rows of a multi-output check', () => {
  it('name the output a comparison or a failure is about', () => {
    // Given the failed check's rows marked as about output 1 (multi-output records carry `output: k`)
    const root = card('cube_jvp_wrong', record => {
      record.comparisons!.forEach(row => (row.output = 1));
      record.function_modes!.forward_ad!.comparisons!.forEach(row => (row.output = 1));
      record.failure!.output = 1;
    });
    // Then every such line says "output 1" after the input, and keeps the output in a data attribute
    expect(texts(root, '[data-testid="gradcheck-comparisons"] li')[0]).toMatch(/^analytical vs backward pass 1 \(x, output 1\): /);
    expect(texts(block(root, 'gradcheck-function-modes'), 'li[data-output="1"]')).toHaveLength(2);
    expect(texts(root, '[data-testid="gradcheck-failure"] > div:first-child')[0]).toMatch(/ on x, output 1$/);
  });
});

describe('the function blocks in Spanish', () => {
  it('translate their headings, row names and comparisons, keeping the codes in data attributes', () => {
    // Given the Spanish translator
    useTranslator(spanish());
    const root = card('cube_jvp_hessian');
    // Then the words are Spanish and the shape line too
    const secondOrder = block(root, 'gradcheck-second-order');
    expect(texts(secondOrder, 'h4')).toEqual(['Segundo orden: la hessiana de x']);
    expect(rows(secondOrder).map(r => r[0])).toEqual([
      'doble backward de autograd',
      'diferencias finitas del gradiente',
      'gradgradcheck de torch'
    ]);
    expect(texts(secondOrder, '[data-testid="gradcheck-function-meta"]')[0]).toBe('forma [2, 2] · float64 · cpu');
    const modes = block(root, 'gradcheck-function-modes');
    expect(texts(modes, 'h4')).toEqual(['Modo directo y gradientes en lote']);
    expect(texts(modes, '[data-testid="gradcheck-function-note"]')[1]).toBe('3 grad_outputs a la vez');
    expect(verdicts(modes)[0]).toEqual(['forward_ad_vs_finite_difference', 'true']);
  });
});
