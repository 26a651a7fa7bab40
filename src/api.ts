/**
 * Requests to the server extension's REST API (`{base_url}/gradcheck/`).
 *
 * Every request goes through `ServerConnection.makeRequest`, which sends the
 * `_xsrf` cookie as a header, so POSTs pass the server's XSRF check. The
 * endpoints, bodies and error mapping are in `requester.ts`; this module only
 * supplies the transport over the Jupyter server connection.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { interfaceLanguage } from './i18n';

import {
  API_NAMESPACE,
  IGradcheckRequester,
  IResponseLike,
  createRequester
} from './requester';

export {
  API_NAMESPACE,
  EXPORT_FORMATS,
  GradcheckRequestError,
  GradcheckValidationError
} from './requester';
export type { ExportFormat } from './requester';

/**
 * Send a request to the server extension and answer the raw response. Every
 * request names JupyterLab's interface language in `Accept-Language`, so the
 * server answers in it (records and ledgers stay English).
 */
async function transport(
  endPoint: string,
  init: RequestInit
): Promise<IResponseLike> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endPoint);
  const headers = new Headers(init.headers);
  headers.set('Accept-Language', interfaceLanguage());
  try {
    return await ServerConnection.makeRequest(
      url,
      { ...init, headers },
      settings
    );
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
}

/** The requester over the Jupyter server connection: what the model uses. */
export const requester: IGradcheckRequester = createRequester(transport);

export const {
  getStatus,
  getLedger,
  getLedgerBlob,
  runCheck,
  changeTolerance,
  changeExpectation,
  verifyLedger,
  exportLedger
} = requester;
