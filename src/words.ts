/**
 * The shown words for the codes a record carries: a verdict, a diagnosis, a
 * comparison, a history target or flag, a verify flag. The codes stay English
 * in the records and in data attributes (`data-status`, `data-diagnosis`,
 * `data-flag`); only these words are translated. An unknown code is shown as
 * itself with its underscores as spaces, so a code added on the server shows
 * before it has words here.
 */
import { trans } from './i18n';

/** The kinds of code that have shown words. */
export type CodeKind =
  | 'status'
  | 'diagnosis'
  | 'comparison'
  | 'observation'
  | 'mode'
  | 'historyTarget'
  | 'historyFlag'
  | 'verifyFlag';

/** Every table, built on each call so it is in the language in force. */
function tables(): { [K in CodeKind]: { [code: string]: string } } {
  return {
    status: {
      passed: trans.__('passed'),
      failed: trans.__('failed'),
      not_run: trans.__('not run'),
      failed_to_run: trans.__('failed to run'),
      // a second-order or function-mode observation (core/check/autograd/second_order.py, forward_and_batched.py)
      observed: trans.__('observed'),
      skipped: trans.__('skipped'),
      error: trans.__('error'),
      returned: trans.__('returned'),
      crashed: trans.__('crashed')
    },
    // core/check/diagnosis.py, and the panel's own failed_to_run
    diagnosis: {
      probable_bug: trans.__('probable bug'),
      precision_limited: trans.__('precision limited'),
      kink: trans.__('kink'),
      nondeterministic: trans.__('nondeterministic'),
      failed_to_run: trans.__('failed to run')
    },
    // core/check/first_order.py's comparisons
    comparison: {
      analytical_vs_backward_pass_1: trans.__('analytical vs backward pass 1'),
      analytical_vs_autograd_grad: trans.__('analytical vs autograd grad'),
      autograd_vs_finite_difference: trans.__('autograd vs finite difference'),
      pass_2_vs_twice_pass_1: trans.__('pass 2 vs twice pass 1'),
      after_clear_none_vs_pass_1: trans.__('after clear none vs pass 1'),
      // core/check/autograd/second_order.py and forward_and_batched.py
      hessian_autograd: trans.__('autograd double backward'),
      hessian_analytical_vs_autograd: trans.__(
        'expected Hessian vs autograd double backward'
      ),
      hessian_autograd_vs_finite_difference: trans.__(
        'autograd double backward vs finite differences of the gradient'
      ),
      forward_ad_vs_finite_difference: trans.__(
        'forward mode vs finite differences along u'
      ),
      forward_ad_vs_backward: trans.__('forward mode vs backward along u'),
      batched_grad_vs_one_at_a_time: trans.__(
        'batched gradients vs one at a time'
      ),
      batched_forward_grad_vs_one_at_a_time: trans.__(
        'batched forward gradients vs one at a time'
      ),
      undefined_grad: trans.__('backward with undefined gradients'),
      undefined_grad_vs_zero: trans.__('gradient vs zero')
    },
    // the observations of core/check/autograd/second_order.py
    observation: {
      hessian_autograd: trans.__('autograd double backward'),
      hessian_finite_difference: trans.__('finite differences of the gradient'),
      torch_gradgradcheck: trans.__('torch gradgradcheck')
    },
    // the modes of core/check/autograd/forward_and_batched.py
    mode: {
      forward_ad: trans.__('forward mode (jvp)'),
      batched_grad: trans.__('batched gradients (vmap)'),
      batched_forward_grad: trans.__('batched forward gradients (vmap)'),
      undefined_grad: trans.__('undefined gradients')
    },
    historyTarget: {
      tolerance: trans.__('tolerance'),
      finite_difference: trans.__('finite-difference tolerance'),
      analytical_gradient: trans.__('expectation')
    },
    // grouping.ts historyFlags
    historyFlag: {
      'widened after failure': trans.__('widened after failure'),
      'after failure': trans.__('after failure'),
      widened: trans.__('widened'),
      tightened: trans.__('tightened'),
      mixed: trans.__('mixed'),
      'revised after observation': trans.__('revised after observation')
    },
    // core/ledger/chain.py and the witness check
    verifyFlag: {
      widened_after_failure: trans.__('widened after failure'),
      expectation_revised_after_observation: trans.__(
        'expectation revised after observation'
      ),
      // witness/verify.py's flags (verify JSON: witness.flags)
      witnessed_late: trans.__('witnessed late'),
      unwitnessed: trans.__('unwitnessed'),
      other_ledgers_witnessed: trans.__('other ledgers witnessed'),
      private_runs_witnessed: trans.__('private runs witnessed')
    }
  };
}

/** The shown words for `code` of `kind`, in the user's language. */
export function wordsFor(kind: CodeKind, code: string): string {
  return tables()[kind][code] ?? code.replace(/_/g, ' ');
}
