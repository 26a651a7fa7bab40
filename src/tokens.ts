/**
 * The extension's public identifiers and the model's token: the plugin,
 * panel and command ids (the settings, the UI tests and users' shortcuts
 * name them, so their values never change), and `IGradcheckModel`, the
 * state of the side panel that other plugins may require.
 */
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { IMetadataOwner } from './binding';
import { ICheckView } from './grouping';
import { ExportFormat } from './requester';
import { IDefaults } from './settings';
import { IBlobPage, ILedgerAnswer, IServerStatus, JSONValue } from './types';
import { FieldErrors, IFormValues, IToleranceEdit } from './validation';
import { IVerifySummary } from './verifyReport';

/** The front-end plugin; its settings (schema/plugin.json) are stored under this id. */
export const PLUGIN_ID = 'jupyterlab-gradcheck:plugin';

/** The panel's stable id, used by the shell and by the UI tests. */
export const PANEL_ID = 'jupyterlab-gradcheck:panel';

/** Command ids. */
export const CommandIDs = {
  open: 'jupyterlab-gradcheck:open-panel',
  export: 'jupyterlab-gradcheck:export-ledger',
  verify: 'jupyterlab-gradcheck:verify-ledger'
} as const;

/**
 * The commands' order in the palette: opening the panel first, in any
 * language. The palette sorts equally good matches by rank before label, and
 * by label alone "export" would come before "open".
 */
export const PALETTE_RANKS: { [K in keyof typeof CommandIDs]: number } = {
  open: 0,
  export: 1,
  verify: 2
};

/** The active notebook as the model sees it: its path, its metadata, and saving it. */
export interface IActiveNotebook {
  /** The notebook's server-relative path (read live: a rename changes it). */
  readonly path: string;
  /** The notebook model whose `metadata.gradcheck` is the binding; null while it loads. */
  readonly metadata: IMetadataOwner | null;
  /** Whether the notebook has unsaved changes. */
  readonly dirty: boolean;
  /** Save the notebook, so the binding on disk is current. */
  save(): Promise<void>;
}

/**
 * Where the active notebook's ledger stands: nothing asked yet, no notebook
 * open, read (into `ledger` and `views`), or unreadable (`ledgerError`).
 */
export type LedgerState = 'idle' | 'no-notebook' | 'loaded' | 'error';

/** The outcome of the last verify, shown under the Verify button. */
export type VerifyState =
  | { state: 'none' }
  | { state: 'no-notebook' }
  | { state: 'running' }
  | {
      state: 'done';
      report: { [key: string]: unknown };
      summary: IVerifySummary;
    }
  | { state: 'failed'; message: string };

/** An export of the ledger, ready to download. */
export interface IExportFile {
  blob: Blob;
  /** `lab1.gradcheck.csv` for lab1.ipynb exported as CSV. */
  filename: string;
  format: ExportFormat;
}

/** The state of the side panel, and every request it makes. */
export interface IGradcheckModel {
  /** Emitted after any change of the state below. */
  readonly changed: ISignal<IGradcheckModel, void>;

  /** The active notebook, or null. */
  readonly notebook: IActiveNotebook | null;
  /** The active notebook's server-relative path, or null. */
  readonly notebookPath: string | null;
  /** The handshake's answer, once the server extension answered. */
  readonly status: IServerStatus | null;
  /** Why the handshake failed (the server extension is missing), or null. */
  readonly serverError: string | null;
  /** The defaults new checks start from. */
  readonly defaults: IDefaults;
  /** Where the ledger stands. */
  readonly ledgerState: LedgerState;
  /** The active notebook's ledger, once read. */
  readonly ledger: ILedgerAnswer | null;
  /** Why the ledger could not be read, when it could not. */
  readonly ledgerError: string | null;
  /** The ledger grouped by check, in the order each check first appears. */
  readonly views: ReadonlyArray<ICheckView>;
  /** Errors of the last run, by declare-form field ('' for the form as a whole). */
  readonly formErrors: FieldErrors;
  /** Whether a check is running. */
  readonly running: boolean;
  /** Whether a reload of status and ledger is in progress. */
  readonly loading: boolean;
  /** Why the binding was not updated after the last action, or ''. */
  readonly notice: string;
  /** The last verify. */
  readonly verification: VerifyState;

  /** Follow another notebook (or none); forgets the last verify. */
  setNotebook(notebook: IActiveNotebook | null): void;
  /** Take new defaults from the settings. */
  setDefaults(defaults: IDefaults): void;
  /** Reload status and the active notebook's ledger, one reload after the other. */
  refresh(): Promise<void>;
  /**
   * A check run in the active notebook's kernel appended to its ledger (its
   * attestation was displayed): reload, and write the new head into the
   * notebook's `metadata.gradcheck` through the notebook model.
   */
  kernelAppended(): Promise<void>;
  /**
   * The active notebook was renamed, and the server moved its ledger along:
   * reload, and write the moved ledger's name and head into the notebook's
   * `metadata.gradcheck` through the notebook model.
   */
  notebookRenamed(): Promise<void>;
  /** Validate the declare form's values, run the check, then reload and rebind. */
  run(values: IFormValues): Promise<void>;
  /** Record a justified tolerance change, then reload and rebind. */
  changeTolerance(
    checkId: string,
    edit: IToleranceEdit,
    notebook?: string | null
  ): Promise<void>;
  /** Record a justified expectation revision, then reload and rebind. */
  changeExpectation(
    checkId: string,
    edit: { analytical_gradient: JSONValue; justification: string },
    notebook?: string | null
  ): Promise<void>;
  /** Save the notebook when it is dirty, verify its ledger, and reload. */
  verify(): Promise<void>;
  /** Fetch the active notebook's ledger export (the caller downloads it). */
  exportLedger(format: ExportFormat): Promise<IExportFile>;
  /**
   * One page of a stored value's elements, from element `offset` on, read from
   * the blob store beside `notebook`'s ledger (only when a person asks).
   */
  readValues(notebook: string, sha: string, offset: number): Promise<IBlobPage>;
}

/** The token of the side panel's model. */
export const IGradcheckModel = new Token<IGradcheckModel>(
  'jupyterlab-gradcheck:IGradcheckModel',
  'The state of the gradient-check side panel: the active notebook, its ledger grouped by check, and the REST calls that change it.'
);
