/**
 * @jest-environment jsdom
 *
 * Stored values (tensors of more than 256 elements kept by their hash beside
 * the ledger) in the panel: the card shows what each is and its summary,
 * and "Show values" reads the elements a page at a time (the panel's own
 * story, that loading the ledger fetches no blob, is in panel.spec.ts).
 */
import { formatDeclared, formatObserved, shapeOf } from '../format';
import { groupByCheck } from '../grouping';
import { checkCard } from '../ledgerView';
import {
  Endpoints,
  GradcheckRequestError,
  createRequester
} from '../requester';
import { storedValueView } from '../storedValueView';
import { JSONValue } from '../types';
import {
  EXPECTED_SHA,
  GRAD_SHA,
  X_SHA,
  bigEntries,
  pagesOfFive,
  stored
} from './storedFixtures';

function byTestId(root: ParentNode, testid: string): HTMLElement[] {
  return Array.from(root.querySelectorAll(`[data-testid="${testid}"]`));
}

function texts(root: ParentNode, testid: string): string[] {
  return byTestId(root, testid).map(node => node.textContent ?? '');
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

describe('stored values as text', () => {
  it('say what the tensor is and its summary, never a list of its elements', () => {
    // Given a stored gradient
    const value = stored(
      GRAD_SHA,
      0.5403023058681398,
      0.99999999995
    ) as unknown as JSONValue;
    // When it is written as an observed value (6 digits) and as declared
    // Then both name dtype, shape and the summary; the shape is the stored one
    expect(formatObserved(value, 'float64', 6)).toBe(
      'float64 [1000], stored · min 0.540302 · max 1.0 · mean 0.841468 · norm 26.9689 · non-finite 0'
    );
    expect(formatDeclared(value)).toContain(
      'min 0.5403023058681398 · max 0.99999999995'
    );
    expect(shapeOf(value)).toEqual([1000]);
  });
});

describe('storedValueView', () => {
  it('shows kind, summary, first values and a short sha256 with the whole hash in its title', () => {
    const pager = jest.fn(async (sha: string, offset: number) =>
      pagesOfFive(sha, offset)
    );
    const view = storedValueView(stored(X_SHA, -1, 1), pager);
    expect(texts(view, 'gradcheck-stored-kind')).toEqual([
      'float64 [1000], stored'
    ]);
    expect(texts(view, 'gradcheck-stored-summary')[0]).toBe(
      'min -1.0 · max 1.0 · mean 0.841468 · norm 26.9689 · non-finite 0'
    );
    expect(texts(view, 'gradcheck-stored-head')[0]).toBe(
      'first 8: -1.0, 0.540319, 0.540336, 0.540352, 0.5404, 0.5405, 0.5406, 0.5407'
    );
    const sha = byTestId(view, 'gradcheck-stored-sha')[0];
    expect(sha.textContent).toBe(`sha256 ${X_SHA.slice(0, 12)}…`);
    expect(sha.title).toBe(`sha256 ${X_SHA}`);
    // Nothing is fetched until "Show values" is pressed
    expect(pager).not.toHaveBeenCalled();
    expect(byTestId(view, 'gradcheck-stored-values')[0].hidden).toBe(true);
  });

  it('reads the first page on "Show values" and the next on "more", then stops', async () => {
    // Given a stored value of 5 elements served 3 at a time
    const pager = jest.fn(async (sha: string, offset: number) =>
      pagesOfFive(sha, offset)
    );
    const view = storedValueView(stored(X_SHA, -1, 1), pager);
    document.body.appendChild(view);
    // When Show values is pressed
    byTestId(view, 'gradcheck-show-values')[0].click();
    await flush();
    // Then the first page is read from element 0 and shown, with how many of how many
    expect(pager).toHaveBeenCalledWith(X_SHA, 0);
    expect(texts(view, 'gradcheck-stored-values')).toEqual(['0.1, 0.2, 0.3']);
    expect(texts(view, 'gradcheck-stored-status')).toEqual(['values 1–3 of 5']);
    expect(byTestId(view, 'gradcheck-show-values')[0].hidden).toBe(true);
    const more = byTestId(view, 'gradcheck-more-values')[0];
    expect(more.hidden).toBe(false);
    // When more is pressed, the next page is read from element 3, and more goes away at the end
    more.click();
    await flush();
    expect(pager).toHaveBeenLastCalledWith(X_SHA, 3);
    expect(texts(view, 'gradcheck-stored-values')).toEqual([
      '0.1, 0.2, 0.3, 0.4, 0.5'
    ]);
    expect(texts(view, 'gradcheck-stored-status')).toEqual(['values 1–5 of 5']);
    expect(more.hidden).toBe(true);
    view.remove();
  });

  it("says why the values could not be read, in the server's words", async () => {
    const pager = jest.fn(async () => {
      throw new GradcheckRequestError(
        409,
        'blob_changed',
        'the blob aaaaaaaaaaaaaaaa is changed: its bytes no longer hash to its name',
        'sha'
      );
    });
    const view = storedValueView(stored(X_SHA, -1, 1), pager);
    byTestId(view, 'gradcheck-show-values')[0].click();
    await flush();
    const status = byTestId(view, 'gradcheck-stored-status')[0];
    expect(status.className).toBe('jp-gradcheck-field-error');
    expect(status.textContent).toBe(
      'Could not read the values: the blob aaaaaaaaaaaaaaaa is changed: its bytes no longer hash to its name'
    );
    expect(byTestId(view, 'gradcheck-show-values')[0].hidden).toBe(false);
  });

  it('offers no "Show values" without a pager', () => {
    expect(
      byTestId(storedValueView(stored(X_SHA, -1, 1)), 'gradcheck-show-values')
    ).toEqual([]);
  });
});

describe('checkCard with stored values', () => {
  it('shows the stored expectation, gradient and input by summary, each with its own hash', () => {
    const pager = jest.fn(async (sha: string, offset: number) =>
      pagesOfFive(sha, offset)
    );
    const card = checkCard(groupByCheck(bigEntries())[0], {
      editTolerance: () => undefined,
      reviseExpectation: () => undefined,
      showValues: pager
    });
    const shas = byTestId(card, 'gradcheck-stored').map(
      node => node.dataset.sha256
    );
    // the expectation and the observation in the columns, then the input in the details
    expect(shas).toEqual([EXPECTED_SHA, GRAD_SHA, X_SHA]);
    expect(texts(card, 'gradcheck-observation-meta')).toEqual([
      'shape [1000] · float64 · cpu'
    ]);
    expect(byTestId(card, 'gradcheck-show-values')).toHaveLength(3);
    expect(card.textContent!.length).toBeLessThan(2000); // summaries, not 3 x 1000 numbers
    expect(pager).not.toHaveBeenCalled();
  });
});

describe('the requester and the panel', () => {
  it('asks GET ledger/blob with the path, sha, offset and limit in the query', async () => {
    // Given a transport that answers one page
    const requests: string[] = [];
    const requester = createRequester(async (endPoint: string) => {
      requests.push(endPoint);
      const body = JSON.stringify(pagesOfFive(X_SHA, 0));
      return {
        ok: true,
        status: 200,
        text: async () => body,
        json: async () => JSON.parse(body),
        blob: async () => new Blob([body])
      };
    });
    // When the first page of a stored value beside "week 2/lab1.ipynb" is read
    const page = await requester.getLedgerBlob('week 2/lab1.ipynb', X_SHA);
    // Then the request names them all, escaped, with the default page of 1000
    expect(requests).toEqual([
      `ledger/blob?path=week%202%2Flab1.ipynb&sha=${X_SHA}&offset=0&limit=1000`
    ]);
    expect(Endpoints.ledgerBlob('a.ipynb', X_SHA, 3000, 1000)).toBe(
      `ledger/blob?path=a.ipynb&sha=${X_SHA}&offset=3000&limit=1000`
    );
    expect(page.values).toEqual([0.1, 0.2, 0.30000000000000004]);
  });
});
