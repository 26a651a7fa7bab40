/**
 * A list of comparisons, one line each: which two observations, where (input,
 * and output for a multi-output check), the largest absolute and relative
 * errors, and the verdict. The check's own comparisons and those of its
 * second-order and function-mode blocks are shown the same way.
 */
import { el, wholeNumbers } from './dom';
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
    wholeNumbers(
      trans.__(
        '%1: max abs err %2, max rel err %3 — %4',
        comparisonLabel(c),
        formatError(c.max_abs_err),
        formatError(c.max_rel_err),
        c.passed ? trans.__('ok') : trans.__('FAILED')
      )
    )
  );
}

/** How many comparison lines are shown before the rest fold. */
export const SHOWN_COMPARISONS = 4;

/**
 * The comparisons as a list with test id `testid` (null when there are
 * none): the failed ones first, then the others in their order; past
 * `SHOWN_COMPARISONS` lines the rest fold under "%1 more comparisons".
 */
export function comparisonList(
  rows: IComparison[] | undefined | null,
  testid = 'gradcheck-comparisons'
): HTMLElement | null {
  if (!rows?.length) {
    return null;
  }
  const ordered = [
    ...rows.filter(row => !row.passed),
    ...rows.filter(row => row.passed)
  ];
  const shown = ordered.slice(0, SHOWN_COMPARISONS);
  const folded = ordered.slice(SHOWN_COMPARISONS);
  return el(
    'ul',
    { class: 'jp-gradcheck-comparisons', testid },
    shown.map(comparisonItem),
    folded.length
      ? el(
          'li',
          { class: 'jp-gradcheck-more' },
          el(
            'details',
            { testid: `${testid}-more` },
            el(
              'summary',
              {},
              trans._n(
                '%1 more comparison',
                '%1 more comparisons',
                folded.length
              )
            ),
            el('ul', {}, folded.map(comparisonItem))
          )
        )
      : null
  );
}
