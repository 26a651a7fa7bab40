/**
 * A stored value in the panel: a tensor of more than 256 elements that the
 * record keeps by its SHA-256 beside the ledger. The card shows what it is
 * (dtype, shape), its summary (min, max, mean, norm, non-finite count), its
 * first values and its hash; its elements are fetched only when the person
 * presses "Show values", a page at a time, with "more" for the next page.
 * Loading the ledger view never fetches a blob.
 */
import { el, replaceChildren, wholeNumbers } from './dom';
import {
  VALUE_DIGITS,
  formatElement,
  formatStoredHead,
  formatStoredKind,
  formatStoredSummary
} from './format';
import { trans } from './i18n';
import { IBlobPage, IStoredValue } from './types';

/** Reads one page of a stored value's elements from element `offset` on (`GET ledger/blob`). */
export type BlobPager = (sha: string, offset: number) => Promise<IBlobPage>;

/** Hex digits of the sha256 shown; the whole hash is in the title. */
export const SHA_SHOWN = 12;

/** What a failed page says: the server's message when it has one. */
function reason(error: unknown): string {
  return error instanceof Error && error.message
    ? error.message
    : String(error);
}

/**
 * The stored value's elements, shown once asked for: `values` grows a page at
 * a time; `status` says how many of how many are shown, and `more` reads on.
 */
function pagedValues(
  value: IStoredValue,
  pager: BlobPager
): (HTMLElement | null)[] {
  const sha = value.stored.sha256;
  const values = el('div', {
    class: 'jp-gradcheck-stored-values',
    testid: 'gradcheck-stored-values',
    hidden: true
  });
  const status = el('div', {
    class: 'jp-gradcheck-meta',
    testid: 'gradcheck-stored-status'
  });
  const show = el(
    'button',
    {
      type: 'button',
      class: 'jp-mod-styled jp-gradcheck-button jp-gradcheck-show-values',
      testid: 'gradcheck-show-values'
    },
    trans.__('Show values')
  );
  const more = el(
    'button',
    {
      type: 'button',
      class: 'jp-mod-styled jp-gradcheck-button jp-gradcheck-more-values',
      testid: 'gradcheck-more-values',
      hidden: true
    },
    trans.__('more')
  );
  const shown: string[] = [];
  const load = async (button: HTMLButtonElement): Promise<void> => {
    button.disabled = true;
    try {
      const page = await pager(sha, shown.length);
      shown.push(...page.values.map(item => formatElement(item, VALUE_DIGITS)));
      values.hidden = false;
      values.title = trans.__('flattened, row-major');
      replaceChildren(values, wholeNumbers(shown.join(', ')));
      status.className = 'jp-gradcheck-meta';
      replaceChildren(
        status,
        trans.__('values 1–%1 of %2', shown.length, page.total)
      );
      show.hidden = true;
      more.hidden = shown.length >= page.total || page.values.length === 0;
    } catch (error) {
      status.className = 'jp-gradcheck-field-error';
      replaceChildren(
        status,
        trans.__('Could not read the values: %1', reason(error))
      );
    } finally {
      button.disabled = false;
    }
  };
  show.addEventListener('click', () => void load(show));
  more.addEventListener('click', () => void load(more));
  return [
    el('div', { class: 'jp-gradcheck-stored-actions' }, show, more),
    values,
    status
  ];
}

/**
 * A stored value: what it is, its summary and first values (full precision
 * in the titles), its sha256 shortened (whole in the title), and, when a
 * pager is given, "Show values".
 */
export function storedValueView(
  value: IStoredValue,
  pager?: BlobPager | null
): HTMLElement {
  const sha = value.stored.sha256;
  return el(
    'div',
    {
      class: 'jp-gradcheck-stored',
      testid: 'gradcheck-stored',
      'data-sha256': sha
    },
    el(
      'div',
      { class: 'jp-gradcheck-value', testid: 'gradcheck-stored-kind' },
      formatStoredKind(value)
    ),
    el(
      'div',
      {
        class: 'jp-gradcheck-stored-summary',
        testid: 'gradcheck-stored-summary',
        title: formatStoredSummary(value)
      },
      wholeNumbers(formatStoredSummary(value, VALUE_DIGITS))
    ),
    value.summary?.head?.length
      ? el(
          'div',
          {
            class: 'jp-gradcheck-stored-summary',
            testid: 'gradcheck-stored-head',
            title: formatStoredHead(value)
          },
          wholeNumbers(formatStoredHead(value, VALUE_DIGITS))
        )
      : null,
    el(
      'div',
      {
        class: 'jp-gradcheck-meta',
        testid: 'gradcheck-stored-sha',
        title: `sha256 ${sha}`
      },
      `sha256 ${sha.slice(0, SHA_SHOWN)}…`
    ),
    pager ? pagedValues(value, pager) : null
  );
}
