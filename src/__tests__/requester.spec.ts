/**
 * The REST calls over a fake transport: which endpoint each call asks, with
 * which method and body, and how a failed answer becomes an error.
 */
import {
  EXPORT_FORMATS,
  Endpoints,
  GradcheckRequestError,
  GradcheckValidationError,
  IResponseLike,
  createRequester,
  errorFrom
} from '../requester';
import {
  interfaceLanguage,
  shownText,
  useLanguageOf,
  useTranslator
} from '../i18n';
import { spanish } from './spanishTranslator';

/** A transport that records each request and answers from a queue. */
function fakeTransport(...answers: IResponseLike[]) {
  const requests: { endPoint: string; init: RequestInit }[] = [];
  const transport = jest.fn(async (endPoint: string, init: RequestInit) => {
    requests.push({ endPoint, init });
    const answer = answers.shift();
    if (!answer) {
      throw new Error(`no answer queued for ${endPoint}`);
    }
    return answer;
  });
  return { transport, requests };
}

function answer(status: number, body: string): IResponseLike {
  return {
    ok: status >= 200 && status < 300,
    status,
    text: async () => body,
    json: async () => JSON.parse(body),
    blob: async () => new Blob([body])
  };
}

describe('Endpoints', () => {
  it('puts the notebook path and the export format in the query, escaped', () => {
    // Given a notebook in a folder with a space and a reserved character
    const path = 'course/week 2/lab#1.ipynb';
    // Then the path is one query value, and the format follows it
    expect(Endpoints.ledger(path)).toBe(
      'ledger?path=course%2Fweek%202%2Flab%231.ipynb'
    );
    expect(Endpoints.export(path, 'html')).toBe(
      'export?path=course%2Fweek%202%2Flab%231.ipynb&format=html'
    );
  });

  it('offers CSV, HTML and JSON exports', () => {
    expect([...EXPORT_FORMATS]).toEqual(['csv', 'html', 'json']);
  });
});

describe('createRequester', () => {
  it('GETs status and the ledger, and POSTs a check as {notebook, check}', async () => {
    // Given a server that answers each request
    const { transport, requests } = fakeTransport(
      answer(200, '{"version": "0.1.0", "devices": []}'),
      answer(200, '{"ledger": "lab1.gradcheck.jsonl", "entries": []}'),
      answer(
        200,
        '{"record": {}, "ledger": {"path": "lab1.gradcheck.jsonl", "entries": 2, "head": "h"}}'
      )
    );
    const requester = createRequester(transport);
    // When the panel shakes hands, reads the ledger and runs a check
    expect((await requester.getStatus()).version).toBe('0.1.0');
    expect((await requester.getLedger('lab1.ipynb')).ledger).toBe(
      'lab1.gradcheck.jsonl'
    );
    const run = await requester.runCheck('lab1.ipynb', {
      function: 'x*x',
      inputs: { x: 3 }
    });
    // Then each went to its endpoint, the reads without a method (GET) and the run as a JSON POST
    expect(requests.map(r => r.endPoint)).toEqual([
      'status',
      'ledger?path=lab1.ipynb',
      'checks'
    ]);
    expect(requests[0].init).toEqual({});
    expect(requests[2].init.method).toBe('POST');
    expect(JSON.parse(requests[2].init.body as string)).toEqual({
      notebook: 'lab1.ipynb',
      check: { function: 'x*x', inputs: { x: 3 } }
    });
    expect(run.ledger.entries).toBe(2);
  });

  it('POSTs tolerance, expectation and verify bodies as given, verify without replay by default', async () => {
    const { transport, requests } = fakeTransport(
      answer(200, '{"entry": {}}'),
      answer(200, '{"entry": {}}'),
      answer(200, '{"ok": true}')
    );
    const requester = createRequester(transport);
    await requester.changeTolerance({
      notebook: 'lab1.ipynb',
      check_id: 'c',
      rtol: 0.5,
      target: 'tolerance',
      justification: 'why'
    });
    await requester.changeExpectation({
      notebook: 'lab1.ipynb',
      check_id: 'c',
      analytical_gradient: '2*x',
      justification: 'why'
    });
    expect(await requester.verifyLedger('lab1.ipynb')).toEqual({ ok: true });
    expect(requests.map(r => [r.endPoint, r.init.method])).toEqual([
      ['tolerance', 'POST'],
      ['expectation', 'POST'],
      ['verify', 'POST']
    ]);
    expect(JSON.parse(requests[0].init.body as string)).toEqual({
      notebook: 'lab1.ipynb',
      check_id: 'c',
      rtol: 0.5,
      target: 'tolerance',
      justification: 'why'
    });
    expect(
      JSON.parse(requests[1].init.body as string).analytical_gradient
    ).toBe('2*x');
    expect(JSON.parse(requests[2].init.body as string)).toEqual({
      path: 'lab1.ipynb',
      replay: false
    });
  });

  it('answers an export as the file body', async () => {
    const { transport, requests } = fakeTransport(
      answer(200, 'student,assignment\n')
    );
    const blob = await createRequester(transport).exportLedger(
      'work/lab1.ipynb',
      'csv'
    );
    expect(requests[0].endPoint).toBe(
      'export?path=work%2Flab1.ipynb&format=csv'
    );
    expect(await blob.text()).toBe('student,assignment\n');
  });

  it("rejects with the server's code, message and field", async () => {
    // Given a server that refuses the function with its error body
    const { transport } = fakeTransport(
      answer(
        400,
        '{"code": "invalid_function", "message": "unknown name y", "field": "function"}'
      )
    );
    // When a check is run
    const refused = createRequester(transport).runCheck('lab1.ipynb', {});
    // Then the error names the field, so the panel can put it beside it
    await expect(refused).rejects.toBeInstanceOf(GradcheckRequestError);
    await expect(refused).rejects.toMatchObject({
      status: 400,
      code: 'invalid_function',
      message: 'unknown name y',
      field: 'function'
    });
  });
});

describe('the reader language of the answers', () => {
  afterEach(() => useTranslator(null));

  it("names JupyterLab's language as an HTTP tag, English without a translator", () => {
    // Given no translator, then a Spanish one whose code is written with an underscore
    useLanguageOf(null);
    expect(interfaceLanguage()).toBe('en');
    useLanguageOf({ languageCode: 'es_ES' } as never);
    // Then the tag the requests send is the HTTP form
    expect(interfaceLanguage()).toBe('es-ES');
  });

  it("shows a record's English reason through the answer's shown translations", async () => {
    // Given an answer whose record keeps an English reason, and shown gives its Spanish
    const reason = 'the hand derivation gives 6 at x, but autograd gives 4';
    const body = JSON.stringify({
      record: { reason },
      shown: { [reason]: 'la derivación a mano da 6 en x, pero autograd da 4' }
    });
    const { transport } = fakeTransport(answer(200, body));
    // When the answer is read
    const read = await createRequester(transport).runCheck('lab1.ipynb', {});
    // Then the record stays English, and the reason is shown in Spanish
    expect(
      (read as unknown as { record: { reason: string } }).record.reason
    ).toBe(reason);
    expect(shownText(reason)).toBe(
      'la derivación a mano da 6 en x, pero autograd da 4'
    );
    expect(shownText('a text no answer translated')).toBe(
      'a text no answer translated'
    );
  });

  it("turns an answer that is not JSON into one line in the reader's language, not the browser's parse error", async () => {
    // Given Spanish, and a 200 answer whose body is not JSON (NaN written bare)
    useTranslator(spanish());
    const { transport } = fakeTransport(answer(200, '{"value": NaN}'));
    // When it is read
    const read = createRequester(transport).getStatus();
    // Then the error is the catalog's Spanish line, without "Unexpected token"
    await expect(read).rejects.toMatchObject({
      code: 'bad_answer',
      message: expect.stringContaining('no es JSON')
    });
    await expect(read).rejects.not.toMatchObject({
      message: expect.stringContaining('Unexpected')
    });
  });
});

describe('errorFrom', () => {
  it('reads the 404 page of a server without the extension as not_found', () => {
    const error = errorFrom(404, '<html><title>404: Not Found</title></html>');
    expect([error.status, error.code, error.message, error.field]).toEqual([
      404,
      'not_found',
      'the server answered HTTP 404 without an explanation',
      null
    ]);
  });

  it('keeps a message without a code, and survives a null body', () => {
    expect(errorFrom(500, '{"message": "worker crashed"}')).toMatchObject({
      code: 'http_500',
      message: 'worker crashed'
    });
    expect(errorFrom(502, 'null')).toMatchObject({
      code: 'http_502',
      message: 'the server answered HTTP 502 without an explanation'
    });
  });

  it('makes client-side refusals request errors with status 0, so the dialogs show them by field', () => {
    const error = new GradcheckValidationError(
      'a justification is required',
      'justification'
    );
    expect(error).toBeInstanceOf(GradcheckRequestError);
    expect([error.status, error.code, error.field]).toEqual([
      0,
      'invalid',
      'justification'
    ]);
  });
});
