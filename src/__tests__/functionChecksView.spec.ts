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

const noop = {
  editTolerance: () => undefined,
  reviseExpectation: () => undefined
};

/** The card of check `id`, its latest record changed by `edit` first when given. */
function card(id: string, edit?: (record: ICheckRecord) => void): HTMLElement {
  const entries = fixture();
  if (edit) {
    const observation = entries
      .filter(e => e.check_id === id && e.kind === 'observation')
      .pop()!;
    edit(observation.data.record as ICheckRecord);
  }
  const view = groupByCheck(entries).find(v => v.id === id);
  expect(view).toBeDefined();
  return checkCard(view!, noop);
}

function texts(root: Element, selector: string): string[] {
  return Array.from(root.querySelectorAll(selector)).map(
    n => n.textContent ?? ''
  );
}

/** Each row of a block: [name, ...cells], the cells' text as shown. */
function rows(block: Element): string[][] {
  return Array.from(block.querySelectorAll('tbody tr')).map(tr =>
    texts(tr, 'th, td')
  );
}

/** Each comparison line of a block: [code, passed]. */
function verdicts(block: Element): [string, string][] {
  return Array.from(
    block.querySelectorAll('[data-testid="gradcheck-function-comparisons"] li')
  ).map(li => [
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
    expect(texts(secondOrder, 'h4')).toEqual([
      'Second order: the Hessian of x'
    ]);
    expect(texts(secondOrder, 'thead th')).toEqual([
      '',
      'Expectation',
      'Observation'
    ]);
    expect(rows(secondOrder)).toEqual([
      [
        'autograd double backward',
        '[[6,0],[0,12]]declared · shape [2, 2]',
        '[[6.0, 0.0], [0.0, 12.0]]shape [2, 2] · float64 · cpu'
      ],
      // the finite differences of the gradient, to 6 significant digits as shown
      [
        'finite differences of the gradient',
        '',
        '[[6.0, 0.0], [0.0, 12.0]]shape [2, 2] · float64 · cpu'
      ],
      ['torch gradgradcheck', '', 'passedgradgradcheck passed']
    ]);
    // and exactly as recorded (JSON numbers are doubles) on hover
    expect(
      Array.from(
        secondOrder.querySelectorAll('[data-testid="gradcheck-function-value"]')
      ).map(node => node.getAttribute('title'))[1]
    ).toBe('[[5.999999999981665, 0.0], [0.0, 11.99999999996333]]');
    expect(
      texts(secondOrder, '[data-testid="gradcheck-function-status"]')
    ).toEqual(['passed']);
    // And both Hessian comparisons follow with their verdicts and errors
    expect(verdicts(secondOrder)).toEqual([
      ['hessian_analytical_vs_autograd', 'true'],
      ['hessian_autograd_vs_finite_difference', 'true']
    ]);
    expect(
      texts(secondOrder, '[data-testid="gradcheck-function-comparisons"] li')[1]
    ).toBe(
      'autograd double backward vs finite differences of the gradient (x): max abs err 3.67e-11, max rel err 3.06e-12 — ok'
    );
  });

  it('says the double backward is the reference when no Hessian was declared', () => {
    // Given an old-style Function checked with hessian="double_backward"
    const secondOrder = block(
      card('cube_double_backward'),
      'gradcheck-second-order'
    );
    // Then no matrix is invented for the expectation, and only autograd vs finite differences is compared
    expect(rows(secondOrder)[0].slice(0, 2)).toEqual([
      'autograd double backward',
      "none declaredautograd's double backward is the reference"
    ]);
    expect(verdicts(secondOrder)).toEqual([
      ['hessian_autograd_vs_finite_difference', 'true']
    ]);
  });
});

describe('a backward that cannot be differentiated again', () => {
  it("shows autograd's Hessian as not observed with the reason, and the kept failure with its reason and no invented values", () => {
    // Given x^3 whose backward detaches x, checked with hessian="double_backward"
    const root = card('cube_detached');
    const autograd = block(root, 'gradcheck-second-order').querySelector(
      'tr[data-observation="hessian_autograd"]'
    )!;
    // Then autograd's row says not observed and why, the finite differences still observed
    expect(texts(autograd, 'td')[1]).toMatch(
      /^not observedthe backward is not differentiable: the gradient of x it returns carries no graph/
    );
    // And the card failed, its kept failure naming the double backward with the reason only
    expect(root.dataset.status).toBe('failed');
    const failure = block(root, 'gradcheck-failure');
    expect(texts(failure, 'div')[0]).toMatch(
      /: autograd double backward on x$/
    );
    expect(texts(failure, '.jp-gradcheck-meta')).toEqual([]);
    expect(texts(failure, '[data-testid="gradcheck-diagnosis"]')[0]).toContain(
      'the backward is not differentiable'
    );
  });
});

describe('forward mode and batched gradients in a check card', () => {
  it('shows the tangent, the batched gradients and the undefined-gradient case with shape, dtype and device, and their comparisons', () => {
    const modes = block(card('cube_jvp_hessian'), 'gradcheck-function-modes');
    expect(texts(modes, 'thead th')).toEqual(['', 'Observation']);
    expect(rows(modes)).toEqual([
      [
        'forward mode (jvp)',
        '-1.43697shape [] scalar · float64 · cpudirection u: standard normal, seed 17'
      ],
      [
        'batched gradients (vmap)',
        '[[-4.24054, -16.9622], [0.700892, 2.80357], [0.1021, 0.408398]]' +
          'shape [3, 2] · float64 · cpu3 grad_outputs at once'
      ],
      // the backward handed an undefined grad_output returns zeros: one case, for the one output
      [
        'undefined gradientsevery grad_output undefined',
        'x: [0.0, 0.0]shape [2] · float64 · cpu'
      ]
    ]);
    expect(verdicts(modes)).toEqual([
      ['forward_ad_vs_finite_difference', 'true'],
      ['forward_ad_vs_backward', 'true'],
      ['batched_grad_vs_one_at_a_time', 'true'],
      ['undefined_grad_vs_zero', 'true']
    ]);
    expect(texts(modes, 'li')[3]).toBe(
      'gradient vs zero (x, every grad_output undefined): max abs err 0, max rel err 0 — ok'
    );
  });

  it("shows a skipped forward mode with PyTorch's reason, and the batched gradients still observed", () => {
    // Given an old-style Function with no jvp
    const modes = block(
      card('cube_double_backward'),
      'gradcheck-function-modes'
    );
    const [forward, batched] = Array.from(
      modes.querySelectorAll('tbody tr')
    ) as HTMLElement[];
    // Then forward mode is marked skipped, with the reason, and no value
    expect(forward.dataset.observation).toBe('forward_ad');
    expect(
      (
        forward.querySelector(
          '[data-testid="gradcheck-function-status"]'
        ) as HTMLElement
      ).dataset.status
    ).toBe('skipped');
    expect(
      texts(forward, '[data-testid="gradcheck-function-note"]')[0]
    ).toContain('You must implement the jvp function');
    expect(
      forward.querySelector('[data-testid="gradcheck-function-value"]')
    ).toBeNull();
    expect(texts(batched, '[data-testid="gradcheck-function-meta"]')).toEqual([
      'shape [3, 2] · float64 · cpu'
    ]);
  });

  it('marks the failed forward-mode comparisons and keeps the failure, the card failed', () => {
    // Given a Function whose jvp is off by 1 %
    const root = card('cube_jvp_wrong');
    const modes = block(root, 'gradcheck-function-modes');
    // Then both forward-mode comparisons say FAILED, the batched and undefined-gradient ones ok
    expect(verdicts(modes)).toEqual([
      ['forward_ad_vs_finite_difference', 'false'],
      ['forward_ad_vs_backward', 'false'],
      ['batched_grad_vs_one_at_a_time', 'true'],
      ['undefined_grad_vs_zero', 'true']
    ]);
    expect(texts(modes, '.jp-gradcheck-failed-line')[0]).toMatch(
      /^forward mode vs finite differences along u \(x\): max abs err 0\.0144, .* — FAILED$/
    );
    // And the card's one verdict badge says failed, and the kept failure names the forward mode
    expect(texts(root, '[data-testid="gradcheck-badge"]')).toEqual(['failed']);
    expect(
      texts(root, '[data-testid="gradcheck-failure"] > div:first-child')[0]
    ).toMatch(/: forward mode vs finite differences along u on x$/);
    // And no second-order block is invented for a check that asked for none
    expect(
      root.querySelector('[data-testid="gradcheck-second-order"]')
    ).toBeNull();
  });

  it('renders a crashed undefined-gradient case with its reason, and a mode it has no words for', () => {
    // Given the record's undefined_grad with a second case, in the engine's shape, that crashed
    // (a backward doing arithmetic on a None grad_output), and a mode added on the server later
    const root = card('cube_jvp_hessian', record => {
      const modes = record.function_modes!;
      modes.undefined_grad!.cases!.push({
        undefined: [1],
        status: 'crashed',
        reason: 'TypeError: unsupported operand'
      });
      modes.some_later_mode = {
        status: 'skipped',
        reason: 'not applicable here'
      };
    });
    const modes = block(root, 'gradcheck-function-modes');
    // Then the crash has its own row saying which grad_output was undefined, and the unknown mode shows its skip
    expect(rows(modes).slice(3)).toEqual([
      [
        'undefined gradientsgrad_output 1 undefined, the others zero',
        'crashedTypeError: unsupported operand'
      ],
      ['some later mode', 'skippednot applicable here']
    ]);
  });

  it('shows nothing of the kind for a plain expression check', () => {
    const plain = checkCard(
      groupByCheck(checkEntries(1, 'x*x@b1', true))[0],
      noop
    );
    expect(plain.querySelector('.jp-gradcheck-function-block')).toBeNull();
  });
});

describe('a check of a function with several outputs', () => {
  it('shows one row per output beside its own expectation, and an output that is not differentiable as not checked', () => {
    // Given (x^2, x^3, an int64 tensor) at x = [1, 2] declared {"outputs": ["2*x", "3*x", null]}
    const root = card('two_outputs');
    const table = block(root, 'gradcheck-columns');
    // Then each output has its row, x's gradient through it beside what was written for it
    expect(
      Array.from(table.querySelectorAll('tbody tr')).map(
        tr => (tr as HTMLElement).dataset.output
      )
    ).toEqual(['0', '1', '2']);
    expect(rows(table)).toEqual([
      [
        'xoutput 0',
        '2*xdeclared · float64 · cpu',
        '[2.0, 4.0]shape [2] · float64 · cpu'
      ],
      [
        'xoutput 1',
        '3*xdeclared · float64 · cpu',
        '[3.0, 12.0]shape [2] · float64 · cpu'
      ],
      [
        'xoutput 2',
        '—declared · float64 · cpu',
        'not differentiable: not checked'
      ]
    ]);
  });

  it('names the output of each comparison and of the kept failure', () => {
    const root = card('two_outputs');
    // Then every comparison line says which output; output 1's two failures come first, and
    // past four lines the other six fold under one summary
    const list = block(root, 'gradcheck-comparisons');
    const lines = texts(list, ':scope > li:not(.jp-gradcheck-more)');
    expect(lines).toEqual([
      'analytical vs backward pass 1 (x, output 1): max abs err 6.0, max rel err 0.5 — FAILED',
      'analytical vs autograd grad (x, output 1): max abs err 6.0, max rel err 0.5 — FAILED',
      'analytical vs backward pass 1 (x, output 0): max abs err 0, max rel err 0 — ok',
      'analytical vs autograd grad (x, output 0): max abs err 0, max rel err 0 — ok'
    ]);
    expect(texts(list, '.jp-gradcheck-more > details > summary')).toEqual([
      '6 more comparisons'
    ]);
    expect(texts(list, '.jp-gradcheck-more li')).toHaveLength(6);
    expect(
      texts(root, 'li[data-output="1"].jp-gradcheck-failed-line')
    ).toHaveLength(2);
    // And the kept failure is on x of output 1, 3*x = 6.0 against autograd's 12.0
    const failure = block(root, 'gradcheck-failure');
    expect(texts(failure, 'div')[0]).toMatch(
      /: analytical vs backward pass 1 on x, output 1$/
    );
    expect(texts(failure, 'div')[1]).toBe(
      'expected 6.0 vs observed 12.0 (abs err 6.0)'
    );
  });

  it('keeps a one-output check to one row per input, with no output named', () => {
    // Given the Function with a jvp, whose expectation is its own backward (no gradient was written)
    const table = block(card('cube_jvp_hessian'), 'gradcheck-columns');
    expect(rows(table)).toEqual([
      [
        'x',
        '<callable the backward of support.functions.CubeWithJvp [sha256 1ff8aa5885f63c42]>declared · float64 · cpu',
        '[3.0, 12.0]shape [2] · float64 · cpu'
      ]
    ]);
    expect(table.querySelector('[data-output]')).toBeNull();
  });
});

describe('a check of a complex input', () => {
  it('shows the declared and the observed complex gradient as a+bi, with the complex dtype', () => {
    // Given sum |z|^2 at z = [1+2i, 0.5-1i], its gradient 2z declared as a complex tensor
    const table = block(card('complex_norm'), 'gradcheck-columns');
    // Then both columns read a+bi: the declaration as written, the observation as Python floats
    expect(rows(table)).toEqual([
      [
        'z',
        '[2+4i, 1-2i]declared · complex128 · cpu',
        '[2.0+4.0i, 1.0-2.0i]shape [2] · complex128 · cpu'
      ]
    ]);
  });
});

describe('the function blocks in Spanish', () => {
  it('translate their headings, row names and comparisons, keeping the codes in data attributes', () => {
    // Given the Spanish translator
    useTranslator(spanish());
    const root = card('cube_jvp_hessian');
    // Then the words are Spanish and the shape line too
    const secondOrder = block(root, 'gradcheck-second-order');
    expect(texts(secondOrder, 'h4')).toEqual([
      'Segundo orden: la hessiana de x'
    ]);
    expect(rows(secondOrder).map(r => r[0])).toEqual([
      'doble backward de autograd',
      'diferencias finitas del gradiente',
      'gradgradcheck de torch'
    ]);
    expect(
      texts(secondOrder, '[data-testid="gradcheck-function-meta"]')[0]
    ).toBe('forma [2, 2] · float64 · cpu');
    const modes = block(root, 'gradcheck-function-modes');
    expect(texts(modes, 'h4')).toEqual(['Modo directo y gradientes en lote']);
    expect(texts(modes, '[data-testid="gradcheck-function-note"]')[1]).toBe(
      '3 grad_outputs a la vez'
    );
    expect(verdicts(modes)[0]).toEqual([
      'forward_ad_vs_finite_difference',
      'true'
    ]);
  });
});
