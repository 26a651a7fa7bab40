/**
 * A custom autograd.Function's extra checks in the side panel, in a real JupyterLab and
 * Chromium: a notebook cell checks a Function with hessian="double_backward" and a Function
 * with a jvp through the Python API; the kernel writes the notebook's ledger, and the panel
 * shows each check's second-order rows and its forward-mode and batched-gradient rows, every
 * value with its shape, dtype and device. A function with two outputs shows a row per output.
 */
import { expect, test } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import { SCREENSHOTS, codeNotebook, openPanel } from './panelHelpers';

/** The cell: an old-style Function (no jvp) and a new-style one with a jvp and a vmap rule, both x^3. */
const SOURCE = `import torch
from jupyterlab_gradcheck.api import check

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad_output

class CubeJvp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.x = inputs[0]

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * grad_output

    @staticmethod
    def jvp(ctx, tangent):
        return 3 * ctx.x ** 2 * tangent

    @staticmethod
    def vmap(info, in_dims, x):
        return x ** 3, in_dims[0]

x = torch.tensor([1.0, 2.0], dtype=torch.float64)
first = check(lambda x: Cube.apply(x).sum(), x=x, hessian="double_backward", id="cube_double_backward")
second = check(lambda x: CubeJvp.apply(x).sum(), x=x, hessian=torch.diag(6 * x), id="cube_jvp")
third = check(lambda x: (x ** 2, x ** 3), (2 * x, 3 * x ** 2), x=x, id="two_outputs")
print(first.passed, second.passed, third.passed)`;

const NOTEBOOK = codeNotebook(SOURCE);

// Tall enough that both cards' function rows fit in the panel for the screenshot.
test.use({ autoGoto: true, viewport: { width: 1280, height: 2000 } });

/** The row of `block` for observation or mode `code`. */
function row(block: Locator, code: string): Locator {
  return block.locator(`tr[data-observation="${code}"]`);
}

test("a custom Function's second order, forward mode and batched gradients show in its card", async ({
  page,
  tmpPath
}) => {
  // Given a notebook whose cell checks the two Functions through the Python API, run in its kernel
  const file = `${tmpPath}/functions.ipynb`;
  await page.contents.uploadContent(JSON.stringify(NOTEBOOK), 'text', file);
  await page.notebook.openByPath(file);
  await page.notebook.activate('functions.ipynb');
  await page.notebook.runCell(0);
  await expect(
    page.locator('.jp-OutputArea-output').getByText('True True True')
  ).toBeVisible({ timeout: 90000 });

  // When the panel is opened
  const panel = await openPanel(page);
  const cards = panel.getByTestId('gradcheck-check');
  await expect(cards).toHaveCount(3, { timeout: 30000 });

  // Then the double-backward check shows autograd's Hessian, its finite differences and gradgradcheck,
  // with no matrix invented for the expectation
  const plain = panel.locator('[data-check-id="cube_double_backward"]');
  await expect(plain.getByTestId('gradcheck-badge')).toHaveText('passed');
  const plainSecond = plain.getByTestId('gradcheck-second-order');
  await expect(plainSecond.locator('h4')).toHaveText(
    'Second order: the Hessian of x'
  );
  const autograd = row(plainSecond, 'hessian_autograd');
  await expect(
    autograd.getByTestId('gradcheck-function-expectation')
  ).toHaveText('none declared');
  await expect(autograd.getByTestId('gradcheck-function-value')).toHaveText(
    '[[6.0, 0.0], [0.0, 12.0]]'
  );
  await expect(autograd.getByTestId('gradcheck-function-meta')).toHaveText(
    'shape [2, 2] · float64 · cpu'
  );
  await expect(
    row(plainSecond, 'hessian_finite_difference').getByTestId(
      'gradcheck-function-meta'
    )
  ).toHaveText('shape [2, 2] · float64 · cpu');
  await expect(
    row(plainSecond, 'torch_gradgradcheck').getByTestId(
      'gradcheck-function-status'
    )
  ).toHaveText('passed');
  // And forward mode is skipped with PyTorch's reason, the batched gradients observed
  const plainModes = plain.getByTestId('gradcheck-function-modes');
  await expect(
    row(plainModes, 'forward_ad').getByTestId('gradcheck-function-status')
  ).toHaveAttribute('data-status', 'skipped');
  await expect(
    row(plainModes, 'forward_ad').getByTestId('gradcheck-function-note')
  ).toContainText('jvp');
  await expect(
    row(plainModes, 'batched_grad').getByTestId('gradcheck-function-meta')
  ).toHaveText('shape [3, 2] · float64 · cpu');

  // And the Function with a jvp shows the declared Hessian beside autograd's, and forward mode observed
  const jvp = panel.locator('[data-check-id="cube_jvp"]');
  const jvpSecond = jvp.getByTestId('gradcheck-second-order');
  await expect(
    row(jvpSecond, 'hessian_autograd').getByTestId(
      'gradcheck-function-expectation'
    )
  ).toHaveText('[[6,0],[0,12]]');
  await expect(
    jvpSecond.locator('li[data-comparison="hessian_analytical_vs_autograd"]')
  ).toHaveAttribute('data-passed', 'true');
  const jvpModes = jvp.getByTestId('gradcheck-function-modes');
  const forward = row(jvpModes, 'forward_ad');
  await expect(forward.getByTestId('gradcheck-function-meta')).toHaveText(
    'shape [] scalar · float64 · cpu'
  );
  await expect(forward.getByTestId('gradcheck-function-note')).toHaveText(
    'direction u: standard normal, seed 17'
  );
  for (const name of [
    'forward_ad_vs_finite_difference',
    'forward_ad_vs_backward',
    'batched_grad_vs_one_at_a_time'
  ]) {
    await expect(
      jvpModes.locator(`li[data-comparison="${name}"]`)
    ).toHaveAttribute('data-passed', 'true');
  }

  // And the function with two outputs has a row per output, each beside its own expectation,
  // and its comparison lines name their output
  const outputs = panel.locator('[data-check-id="two_outputs"]');
  const rows = outputs.getByTestId('gradcheck-columns').locator('tbody tr');
  await expect(rows).toHaveCount(2);
  await expect(rows.nth(1)).toHaveAttribute('data-output', '1');
  await expect(
    rows.nth(1).getByTestId('gradcheck-expectation-value')
  ).toHaveText('[3,12]');
  await expect(
    rows.nth(1).getByTestId('gradcheck-observation-value')
  ).toHaveText('[3.0, 12.0]');
  await expect(outputs.locator('li[data-output="1"]').first()).toContainText(
    '(x, output 1)'
  );

  // And the screenshot docs/side-panel.md shows is taken: the declare form folded, the jvp check's card in view
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.sidebar.setWidth(480, 'right');
  await panel.locator('details.jp-gradcheck-section > summary').first().click();
  await jvp.scrollIntoViewIfNeeded();
  await jvp.screenshot({
    path: path.join(SCREENSHOTS, 'side-panel-function.png')
  });
});
