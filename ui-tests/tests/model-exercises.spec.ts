/**
 * The model exercises of the expression language, declared in the side panel's
 * form and run, as a student does: softmax with cross-entropy over one sample,
 * the mean squared error of a linear model over four samples, and the softmax
 * check with its "- y" forgotten.
 *
 * The form takes several inputs as one JSON object (name -> number or nested
 * list, so a matrix is a list of rows) and a per-input analytical gradient as
 * a JSON object of name -> expression. The exercises are those of
 * tests/support/model_exercises.py, typed here as text; the gradients they
 * must show are worked out by hand below, so a wrong observation fails.
 *
 * Each test works in its own temporary folder, so each has its own notebook
 * and ledger, and its card is the only one in the panel.
 */
import { IJupyterLabPageFixture, expect, test } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';

import { declareWithNotes, openNotebook, openPanel } from './panelHelpers';

/** float64 autograd against values worked out by hand in JavaScript numbers. */
const HAND_TOLERANCE = 1e-12;

const TOTAL = Math.exp(1) + Math.exp(2) + Math.exp(3);
/** softmax([1, 2, 3]) - [0, 1, 0], by hand. */
const SOFTMAX_MINUS_Y = [
  Math.exp(1) / TOTAL,
  Math.exp(2) / TOTAL - 1,
  Math.exp(3) / TOTAL
];
/** -log_softmax([1, 2, 3]), by hand. */
const MINUS_LOG_SOFTMAX = [1, 2, 3].map(z => Math.log(TOTAL) - z);

/** The residual r = X @ w + b - y of the linear model, by hand. */
const RESIDUAL = [-1.0, 1.2, -1.75, 1.5];
/** 2/4 * X.T @ r and 2/4 * sum(r). */
const MSE_W_GRADIENT = [
  0.5 * (-1.0 + 3.6 - 0.875 + 3.0),
  0.5 * (-2.0 - 1.2 + 1.5)
];
const MSE_B_GRADIENT = 0.5 * (-1.0 + 1.2 - 1.75 + 1.5);
/** 2/4 * outer(r, w) and -2/4 * r. */
const MSE_X_GRADIENT = RESIDUAL.map(r => [0.5 * r * 0.3, 0.5 * r * -0.2]);
const MSE_Y_GRADIENT = RESIDUAL.map(r => -0.5 * r);

const SOFTMAX = {
  function: '-(y*log_softmax(z, dim=0)).sum()',
  inputs: '{"z": [1, 2, 3], "y": [0, 1, 0]}',
  origin:
    'd/dz_i of -sum_j y_j (z_j - log sum_k exp z_k) = softmax(z)_i sum_j y_j - y_i',
  destination: 'z.grad and y.grad'
};

/** The numbers of a shown value such as `[0.09, -0.75, 0.66]` or `[[0.1, 0.2], …]`, flattened. */
function numbers(text: string): number[] {
  return (text.match(/-?\d+(\.\d+)?(e[+-]\d+)?/g) ?? []).map(Number);
}

/** What one input's row of a check card must show. */
interface IInputRow {
  /** The analytical gradient declared for the input, as typed. */
  declared: string;
  /** The observed gradient's meta line: shape, dtype and device. */
  meta: string;
  /** The gradient worked out by hand, that the observed one must equal number by number. */
  gradient: number | number[] | number[][];
}

/** The softmax story's rows: z's declared expression, right or wrong, beside the true gradients of z and y. */
function softmaxRows(declaredZ: string): { [input: string]: IInputRow } {
  return {
    z: {
      declared: declaredZ,
      meta: 'shape [3] · float64 · cpu',
      gradient: SOFTMAX_MINUS_Y
    },
    y: {
      declared: '-log_softmax(z, dim=0)',
      meta: 'shape [3] · float64 · cpu',
      gradient: MINUS_LOG_SOFTMAX
    }
  };
}

/** Each input's row of a check card: its declared expectation beside its observed gradient. */
async function expectRows(
  card: Locator,
  rows: { [input: string]: IInputRow }
): Promise<void> {
  await expect(card.locator('tbody tr')).toHaveCount(Object.keys(rows).length);
  for (const [input, want] of Object.entries(rows)) {
    const tr = card.locator(`tr[data-input="${input}"]`);
    await expect(tr.getByTestId('gradcheck-expectation-value')).toHaveText(
      want.declared
    );
    await expect(tr.getByTestId('gradcheck-observation-meta')).toHaveText(
      want.meta
    );
    const hand = [want.gradient].flat(2);
    // The cell shows 6 significant digits (so within half a unit of the 6th, 5e-6 relative);
    // its title (hover) holds the full value, held to HAND_TOLERANCE below
    const value = tr.getByTestId('gradcheck-observation-value');
    const shown = numbers((await value.getAttribute('title')) ?? '');
    const rounded = numbers((await value.textContent()) ?? '');
    rounded.forEach((number, i) =>
      expect(
        Math.abs(number - hand[i]),
        `${input}[${i}] as shown: ${number} against ${hand[i]}`
      ).toBeLessThanOrEqual(Math.abs(hand[i]) * 5e-6 + 1e-12)
    );
    expect(shown, `the gradient shown for ${input}`).toHaveLength(hand.length);
    shown.forEach((value, i) =>
      expect(
        Math.abs(value - hand[i]),
        `${input}[${i}]: ${value} against ${hand[i]}`
      ).toBeLessThanOrEqual(HAND_TOLERANCE)
    );
  }
}

/**
 * In a fresh notebook, open the panel from the palette, declare the check in its form and
 * press Run; wait for the check's one card.
 */
async function runInPanel(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  fields: Parameters<typeof declareWithNotes>[1]
): Promise<{ panel: Locator; card: Locator }> {
  await openNotebook(page, tmpPath);
  const panel = await openPanel(page);
  await declareWithNotes(panel, fields);
  const cards = panel.getByTestId('gradcheck-check');
  await expect(cards).toHaveCount(1, { timeout: 30000 });
  return { panel, card: cards.first() };
}

/** The card's verdict, in its status attribute and its badge, and how many failures it keeps. */
async function expectVerdict(
  card: Locator,
  verdict: 'passed' | 'failed',
  failuresKept: number
): Promise<void> {
  await expect(card).toHaveAttribute('data-status', verdict);
  await expect(card.getByTestId('gradcheck-badge')).toHaveText(verdict);
  await expect(card.getByTestId('gradcheck-failure')).toHaveCount(failuresKept);
}

test.use({ autoGoto: true });

test('softmax with cross-entropy passes with its hand gradients for z and y', async ({
  page,
  tmpPath
}) => {
  // Given -(y*log_softmax(z, dim=0)).sum() at z = [1, 2, 3] with the one-hot y = [0, 1, 0],
  // and one analytical gradient per input: softmax(z, dim=0) - y for z, -log_softmax(z, dim=0) for y
  // When it is declared in the panel's form and run
  const { panel, card } = await runInPanel(page, tmpPath, {
    ...SOFTMAX,
    analytical: '{"z": "softmax(z, dim=0) - y", "y": "-log_softmax(z, dim=0)"}'
  });

  // Then its one card shows it passed, with no failure kept
  await expectVerdict(card, 'passed', 0);
  await expect(panel.getByTestId('gradcheck-error-form')).toBeEmpty();

  // And each input's row has the expression declared for it beside its observed float64
  // gradient, which is softmax(z) - y and -log_softmax(z) as worked out by hand
  await expectRows(card, softmaxRows('softmax(z, dim=0) - y'));

  // And every comparison the run made passed
  const comparisons = card.getByTestId('gradcheck-comparisons').locator('li');
  expect(await comparisons.count()).toBeGreaterThan(0);
  await expect(
    card.locator(
      '[data-testid="gradcheck-comparisons"] li[data-passed="false"]'
    )
  ).toHaveCount(0);
  await expect(panel.getByTestId('gradcheck-chain-badge')).toHaveText(
    'chain OK'
  );
});

test('the mean squared error of a linear model passes with its hand gradients for w, b, X and y', async ({
  page,
  tmpPath
}) => {
  // Given mean((X @ w + b - y) ** 2) over four samples of two features (X a 4x2 matrix
  // typed as a list of rows, b a scalar), with the gradient of each input written by hand
  // through the residual r = X @ w + b - y
  // When it is declared in the panel's form and run
  const { card } = await runInPanel(page, tmpPath, {
    function: 'mean((X @ w + b - y) ** 2)',
    inputs:
      '{"X": [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 1.0]], "w": [0.3, -0.2], "b": 0.1, "y": [1.0, 0.0, 2.0, -1.0]}',
    analytical:
      '{"w": "2/4 * X.T @ (X @ w + b - y)", "b": "2/4 * sum(X @ w + b - y)", ' +
      '"X": "2/4 * outer(X @ w + b - y, w)", "y": "-2/4 * (X @ w + b - y)"}',
    origin: 'chain rule through the residual r = X @ w + b - y of mean(r ** 2)',
    destination: 'w.grad, b.grad, X.grad and y.grad'
  });

  // Then its one card shows it passed, with no failure kept
  await expectVerdict(card, 'passed', 0);

  // And each of the four inputs has its own row: the expression declared for it, its
  // gradient's shape, and the gradient itself, equal to the one worked out by hand
  await expectRows(card, {
    X: {
      declared: '2/4 * outer(X @ w + b - y, w)',
      meta: 'shape [4, 2] · float64 · cpu',
      gradient: MSE_X_GRADIENT
    },
    w: {
      declared: '2/4 * X.T @ (X @ w + b - y)',
      meta: 'shape [2] · float64 · cpu',
      gradient: MSE_W_GRADIENT
    },
    b: {
      declared: '2/4 * sum(X @ w + b - y)',
      meta: 'shape [] scalar · float64 · cpu',
      gradient: MSE_B_GRADIENT
    },
    y: {
      declared: '-2/4 * (X @ w + b - y)',
      meta: 'shape [4] · float64 · cpu',
      gradient: MSE_Y_GRADIENT
    }
  });
  await expect(
    card.locator(
      '[data-testid="gradcheck-comparisons"] li[data-passed="false"]'
    )
  ).toHaveCount(0);
});

test('softmax with the "- y" forgotten fails at z and is diagnosed a probable bug', async ({
  page,
  tmpPath
}) => {
  // Given the same softmax loss, but softmax(z, dim=0) declared for z: the "- y" forgotten
  // When it is declared in the panel's form and run
  const { panel, card } = await runInPanel(page, tmpPath, {
    ...SOFTMAX,
    analytical: '{"z": "softmax(z, dim=0)", "y": "-log_softmax(z, dim=0)"}'
  });

  // Then its card shows it failed, and the failure is kept
  await expectVerdict(card, 'failed', 1);
  const failure = card.getByTestId('gradcheck-failure');

  // And the failure names z, the input whose expectation is wrong, diagnosed a probable bug
  await expect(failure).toContainText(' on z');
  const diagnosis = failure.getByTestId('gradcheck-diagnosis');
  await expect(diagnosis).toHaveAttribute('data-diagnosis', 'probable_bug');
  await expect(diagnosis).toContainText('diagnosis: probable bug');

  // And the observation is still the true gradient softmax(z) - y, beside the wrong expectation
  await expectRows(card, softmaxRows('softmax(z, dim=0)'));
  await expect(
    card
      .locator('[data-testid="gradcheck-comparisons"] li[data-passed="false"]')
      .first()
  ).toBeVisible();
  // And the failure is a finding, not an error: nothing is shown under Run, and the chain holds
  await expect(panel.getByTestId('gradcheck-error-form')).toBeEmpty();
  await expect(panel.getByTestId('gradcheck-chain-badge')).toHaveText(
    'chain OK'
  );
});
