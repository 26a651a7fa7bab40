/**
 * A verdict badge: its text is the verdict (translated), so it reads without
 * colour; the code stays English in `data-status` and in its CSS class.
 */
import { el } from './dom';
import { wordsFor } from './words';

/** A badge for `status`; `testid` tells the check's own verdict from a row's (gradgradcheck, a skip). */
export function badge(
  status: string,
  text = wordsFor('status', status),
  testid = 'gradcheck-badge'
): HTMLElement {
  return el(
    'span',
    {
      class: `jp-gradcheck-badge jp-gradcheck-badge-${status}`,
      testid,
      'data-status': status
    },
    text
  );
}
