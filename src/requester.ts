/**
 * The REST calls of the server extension (`{base_url}/gradcheck/`), built on
 * an injected transport. Pure: the endpoints, bodies and error mapping live
 * here, so they are tested with a fake transport; `api.ts` supplies the real
 * one (`ServerConnection.makeRequest`, which sends the `_xsrf` header).
 */
import {
  IBlobPage,
  ICheckRecord,
  IErrorBody,
  ILedgerAnswer,
  ILedgerEntry,
  IRunAnswer,
  IServerStatus,
  JSONValue
} from './types';
import { learnShown, trans } from './i18n';

/** The URL namespace of the server extension. */
export const API_NAMESPACE = 'gradcheck';

/** Elements of a stored value the panel asks for at a time ("Show values", then "more"). */
export const BLOB_PAGE = 1000;

/** Export formats the panel offers. */
export const EXPORT_FORMATS = ['csv', 'html', 'json'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** An error answered by the server, with the field it names when it names one. */
export class GradcheckRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field: string | null
  ) {
    super(message);
    this.name = 'GradcheckRequestError';
  }
}

/**
 * A change refused on the client before any request was sent (status 0).
 * It is a `GradcheckRequestError`, so the edit dialogs show it beside its field.
 */
export class GradcheckValidationError extends GradcheckRequestError {
  constructor(message: string, field: string | null) {
    super(0, 'invalid', message, field);
    this.name = 'GradcheckValidationError';
  }
}

/** The error a failed answer stands for: the server's body when it has one. */
export function errorFrom(status: number, text: string): GradcheckRequestError {
  let body: Partial<IErrorBody> = {};
  try {
    body = JSON.parse(text) as Partial<IErrorBody>;
  } catch {
    body = {};
  }
  if (!body || typeof body !== 'object') {
    body = {};
  }
  if (typeof body.code === 'string' && typeof body.message === 'string') {
    return new GradcheckRequestError(
      status,
      body.code,
      body.message,
      body.field ?? null
    );
  }
  const code = status === 404 ? 'not_found' : `http_${status}`;
  const message =
    (typeof body.message === 'string' && body.message) ||
    trans.__('the server answered HTTP %1 without an explanation', status);
  return new GradcheckRequestError(status, code, message, null);
}

/** The endpoints, relative to the namespace. */
export const Endpoints = {
  status: (): string => 'status',
  ledger: (notebook: string): string =>
    `ledger?path=${encodeURIComponent(notebook)}`,
  ledgerBlob: (
    path: string,
    sha: string,
    offset: number,
    limit: number
  ): string =>
    `ledger/blob?path=${encodeURIComponent(path)}&sha=${encodeURIComponent(sha)}` +
    `&offset=${offset}&limit=${limit}`,
  checks: (): string => 'checks',
  tolerance: (): string => 'tolerance',
  expectation: (): string => 'expectation',
  verify: (): string => 'verify',
  export: (path: string, format: ExportFormat): string =>
    `export?path=${encodeURIComponent(path)}&format=${encodeURIComponent(format)}`
};

/** The part of a fetch `Response` the requester reads. */
export interface IResponseLike {
  readonly ok: boolean;
  readonly status: number;
  text(): Promise<string>;
  json(): Promise<unknown>;
  blob(): Promise<Blob>;
}

/** The edge: send `init` to `{base_url}/gradcheck/{endPoint}` and answer the raw response. */
export type Transport = (
  endPoint: string,
  init: RequestInit
) => Promise<IResponseLike>;

/** Body of `POST tolerance`. */
export interface IToleranceChange {
  notebook: string;
  check_id: string;
  rtol?: number;
  atol?: number;
  target?: string;
  justification: string;
}

/** Body of `POST expectation`. */
export interface IExpectationChange {
  notebook: string;
  check_id: string;
  analytical_gradient: JSONValue;
  justification: string;
}

/** Every REST call the panel makes. The model receives one of these. */
export interface IGradcheckRequester {
  /** The version handshake: fails when the server extension is absent. */
  getStatus(): Promise<IServerStatus>;
  /** The ledger of a notebook (server-relative path of the notebook). */
  getLedger(notebook: string): Promise<ILedgerAnswer>;
  /** One page of a stored value's elements, read from the blob store beside the notebook's ledger. */
  getLedgerBlob(
    notebook: string,
    sha: string,
    offset?: number,
    limit?: number
  ): Promise<IBlobPage>;
  /** Declare and run a check into the notebook's ledger. */
  runCheck(notebook: string, check: ICheckRecord): Promise<IRunAnswer>;
  /** Change a check's tolerance, with its justification. */
  changeTolerance(body: IToleranceChange): Promise<{ entry: ILedgerEntry }>;
  /** Revise a check's expectation, with its justification. */
  changeExpectation(body: IExpectationChange): Promise<{ entry: ILedgerEntry }>;
  /** Verify the notebook's ledger chain and binding. */
  verifyLedger(
    path: string,
    replay?: boolean
  ): Promise<{ [key: string]: unknown }>;
  /** Fetch an export of the notebook's ledger as a file body. */
  exportLedger(path: string, format: ExportFormat): Promise<Blob>;
}

function post(body: unknown): RequestInit {
  return { method: 'POST', body: JSON.stringify(body) };
}

/** The requester over a transport; a failed answer rejects with a `GradcheckRequestError`. */
export function createRequester(transport: Transport): IGradcheckRequester {
  const send = async (
    endPoint: string,
    init: RequestInit = {}
  ): Promise<IResponseLike> => {
    const response = await transport(endPoint, init);
    if (!response.ok) {
      throw errorFrom(response.status, await response.text());
    }
    return response;
  };
  const sendJSON = async <T>(
    endPoint: string,
    init: RequestInit = {}
  ): Promise<T> => {
    const response = await send(endPoint, init);
    let answer: unknown;
    try {
      answer = await response.json();
    } catch {
      // The browser's own words ("Unexpected token 'N'...") mean nothing to a student.
      throw new GradcheckRequestError(
        response.status,
        'bad_answer',
        trans.__(
          'the server answered with text that is not JSON (HTTP %1); reload the page, and if it persists, restart the server',
          response.status
        ),
        null
      );
    }
    if (answer && typeof answer === 'object') {
      learnShown((answer as { shown?: unknown }).shown);
    }
    return answer as T;
  };

  return {
    getStatus: () => sendJSON<IServerStatus>(Endpoints.status()),
    getLedger: notebook => sendJSON<ILedgerAnswer>(Endpoints.ledger(notebook)),
    getLedgerBlob: (notebook, sha, offset = 0, limit = BLOB_PAGE) =>
      sendJSON<IBlobPage>(Endpoints.ledgerBlob(notebook, sha, offset, limit)),
    runCheck: (notebook, check) =>
      sendJSON<IRunAnswer>(Endpoints.checks(), post({ notebook, check })),
    changeTolerance: body =>
      sendJSON<{ entry: ILedgerEntry }>(Endpoints.tolerance(), post(body)),
    changeExpectation: body =>
      sendJSON<{ entry: ILedgerEntry }>(Endpoints.expectation(), post(body)),
    verifyLedger: (path, replay = false) =>
      sendJSON<{ [key: string]: unknown }>(
        Endpoints.verify(),
        post({ path, replay })
      ),
    exportLedger: async (path, format) =>
      (await send(Endpoints.export(path, format))).blob()
  };
}
