/**
 * A list of comparisons, one line each: which two observations, where (input,
 * and output for a multi-output check), the largest absolute and relative
 * errors, and the verdict. The check's own comparisons and those of its
 * second-order and function-mode blocks are shown the same way.
 */
import { el } from './dom';
import { formatError, formatUndefinedCase, formatWhere } from './format';
import { trans } from './i18n';
import { IComparison } from './types';
import { wordsFor } from './words';

/**
 * A comparison's name in words with where it applies: `autograd vs finite
 * difference (x, output 1)`; an undefined-gradient row also says which case.
 */
export function comparisonLabel(comparison: IComparison): string {
  const parts = [formatWhere(comparison.input, comparison.output)];
  if (comparison.undefined !== undefined && comparison.undefined !== null) {
    parts.push(formatUndefinedCase(comparison.undefined));
  }
  const where = parts.filter(part => part).join(', ');
  return `${wordsFor('comparison', comparison.name)}${where ? ` (${where})` : ''}`;
}

/** One comparison's line; a failed one is marked so it stands out. */
function comparisonItem(c: IComparison): HTMLElement {
  return el(
    'li',
    {
      class: c.passed ? '' : 'jp-gradcheck-failed-line',
      'data-passed': String(c.passed),
      'data-comparison': c.name,
      'data-output':
        c.output === undefined || c.output === null
          ? undefined
          : String(c.output)
    },
    trans.__(
      '%1: max abs err %2, max rel err %3 — %4',
      comparisonLabel(c),
      formatError(c.max_abs_err),
      formatError(c.max_rel_err),
      c.passed ? trans.__('ok') : trans.__('FAILED')
    )
  );
}

/** The comparisons as a list with test id `testid` (null when there are none). */
export function comparisonList(
  rows: IComparison[] | undefined | null,
  testid = 'gradcheck-comparisons'
): HTMLElement | null {
  if (!rows?.length) {
    return null;
  }
  return el(
    'ul',
    { class: 'jp-gradcheck-comparisons', testid },
    rows.map(comparisonItem)
  );
}
