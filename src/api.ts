/**
 * Requests to the server extension's REST API (`{base_url}/gradcheck/`).
 *
 * Every request goes through `ServerConnection.makeRequest`, which sends the
 * `_xsrf` cookie as a header, so POSTs pass the server's XSRF check.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import {
  ICheckRecord,
  IErrorBody,
  ILedgerAnswer,
  ILedgerEntry,
  IRunAnswer,
  IServerStatus
} from './types';

/** The URL namespace of the server extension. */
export const API_NAMESPACE = 'gradcheck';

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

function errorFrom(status: number, text: string): GradcheckRequestError {
  let body: Partial<IErrorBody> = {};
  try {
    body = JSON.parse(text) as Partial<IErrorBody>;
  } catch {
    body = {};
  }
  if (typeof body.code === 'string' && typeof body.message === 'string') {
    return new GradcheckRequestError(status, body.code, body.message, body.field ?? null);
  }
  const code = status === 404 ? 'not_found' : `http_${status}`;
  const message = (typeof body.message === 'string' && body.message) || `HTTP ${status}`;
  return new GradcheckRequestError(status, code, message, null);
}

/** Send a request and return the raw response once it succeeded. */
async function send(endPoint: string, init: RequestInit = {}): Promise<Response> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (!response.ok) {
    throw errorFrom(response.status, await response.text());
  }
  return response;
}

async function sendJSON<T>(endPoint: string, init: RequestInit = {}): Promise<T> {
  const response = await send(endPoint, init);
  return (await response.json()) as T;
}

function post(body: unknown): RequestInit {
  return { method: 'POST', body: JSON.stringify(body) };
}

/** The version handshake: fails when the server extension is absent. */
export function getStatus(): Promise<IServerStatus> {
  return sendJSON<IServerStatus>('status');
}

/** The ledger of a notebook (server-relative path of the notebook). */
export function getLedger(notebook: string): Promise<ILedgerAnswer> {
  return sendJSON<ILedgerAnswer>(`ledger?path=${encodeURIComponent(notebook)}`);
}

/** Declare and run a check into the notebook's ledger. */
export function runCheck(notebook: string, check: ICheckRecord): Promise<IRunAnswer> {
  return sendJSON<IRunAnswer>('checks', post({ notebook, check }));
}

/** Change a check's tolerance, with its justification. */
export function changeTolerance(body: {
  notebook: string;
  check_id: string;
  rtol?: number;
  atol?: number;
  target?: string;
  justification: string;
}): Promise<{ entry: ILedgerEntry }> {
  return sendJSON<{ entry: ILedgerEntry }>('tolerance', post(body));
}

/** Revise a check's expectation, with its justification. */
export function changeExpectation(body: {
  notebook: string;
  check_id: string;
  analytical_gradient: unknown;
  justification: string;
}): Promise<{ entry: ILedgerEntry }> {
  return sendJSON<{ entry: ILedgerEntry }>('expectation', post(body));
}

/** Verify the notebook's ledger chain and binding. */
export function verifyLedger(path: string, replay = false): Promise<{ [key: string]: unknown }> {
  return sendJSON<{ [key: string]: unknown }>('verify', post({ path, replay }));
}

/** Export formats the panel offers. */
export const EXPORT_FORMATS = ['csv', 'html', 'json'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Fetch an export of the notebook's ledger as a file body. */
export async function exportLedger(path: string, format: ExportFormat): Promise<Blob> {
  const response = await send(
    `export?path=${encodeURIComponent(path)}&format=${encodeURIComponent(format)}`
  );
  return response.blob();
}
