/**
 * Keeps the model on the active notebook: the notebook tracker's current
 * notebook becomes the model's, and a change of notebook, or a rename of the
 * active one, reloads the model.
 */
import { ISignal } from '@lumino/signaling';

import { IMetadataOwner, followRename } from './binding';
import { IActiveNotebook, IGradcheckModel } from './tokens';

/** The part of a `NotebookPanel` the model needs. */
export interface INotebookPanelLike {
  readonly context: {
    readonly localPath: string;
    readonly pathChanged: ISignal<unknown, string>;
    /** 'started', 'completed' or 'failed' for each save (JupyterLab's context has it). */
    readonly saveState?: ISignal<unknown, string>;
    save(): Promise<void>;
  };
  readonly model: (IMetadataOwner & { readonly dirty: boolean }) | null;
}

/** The part of an `INotebookTracker` the model needs. */
export interface INotebookTrackerLike {
  readonly currentWidget: INotebookPanelLike | null;
  readonly currentChanged: ISignal<unknown, unknown>;
}

/** A notebook panel as the model's active notebook; its fields are read live. */
export function activeNotebook(panel: INotebookPanelLike): IActiveNotebook {
  return {
    get path() {
      return panel.context.localPath;
    },
    get metadata() {
      return panel.model;
    },
    get dirty() {
      return !!panel.model?.dirty;
    },
    save: () => panel.context.save()
  };
}

/**
 * Follow the tracker's current notebook. The model takes the current one now,
 * without reloading (the panel reloads when it is shown); a later change of
 * notebook reloads it, a rename reloads it and binds the moved ledger, and a
 * completed save reloads it (the saved binding is what the header judges).
 * Returns a function that stops following.
 */
export function followActiveNotebook(
  tracker: INotebookTrackerLike,
  model: IGradcheckModel
): () => void {
  let watched: INotebookPanelLike | null = null;
  const onPathChanged = () => void model.notebookRenamed();
  const onSaveState = (_sender: unknown, state: string) => {
    if (state === 'completed') {
      void model.refresh();
    }
  };
  const watch = (panel: INotebookPanelLike | null) => {
    watched?.context.pathChanged.disconnect(onPathChanged);
    watched?.context.saveState?.disconnect(onSaveState);
    watched = panel;
    panel?.context.pathChanged.connect(onPathChanged);
    panel?.context.saveState?.connect(onSaveState);
    model.setNotebook(panel ? activeNotebook(panel) : null);
  };
  const onCurrentChanged = () => {
    watch(tracker.currentWidget);
    void model.refresh();
  };
  tracker.currentChanged.connect(onCurrentChanged);
  watch(tracker.currentWidget);
  return () => {
    tracker.currentChanged.disconnect(onCurrentChanged);
    watched?.context.pathChanged.disconnect(onPathChanged);
    watched?.context.saveState?.disconnect(onSaveState);
    watched = null;
  };
}

/**
 * Keep one notebook's binding on its ledger through renames: when the notebook
 * is renamed (the server moves its ledger along), the binding in its model
 * names the moved ledger at once, before a first-save rename's save writes the
 * model. Every open notebook is watched, the active one or not. Returns a
 * function that stops watching.
 */
export function watchRenames(panel: INotebookPanelLike): () => void {
  const onPathChanged = (_sender: unknown, path: string) => {
    if (panel.model) {
      followRename(panel.model, path);
    }
  };
  panel.context.pathChanged.connect(onPathChanged);
  return () => panel.context.pathChanged.disconnect(onPathChanged);
}

/** The MIME type of the attestation a check run in a kernel displays (core.ledger.attestation). */
export const ATTESTATION_MIME =
  'application/vnd.jupyterlab-gradcheck.attestation+json';

/** The part of a kernel message the attestation watcher reads. */
export interface IKernelMessageLike {
  readonly header: { readonly msg_type: string };
  readonly content: unknown;
}

/** Whether a kernel message displays a check's attestation (its ledger gained an entry). */
export function carriesAttestation(message: IKernelMessageLike): boolean {
  const kinds = ['display_data', 'execute_result', 'update_display_data'];
  if (!kinds.includes(message.header.msg_type)) {
    return false;
  }
  const data = (
    message.content as { data?: { [mime: string]: unknown } } | null
  )?.data;
  return !!data && typeof data === 'object' && ATTESTATION_MIME in data;
}

/** The part of a `NotebookPanel` the attestation watcher needs. */
export interface IKernelPanelLike {
  readonly sessionContext: {
    readonly iopubMessage: ISignal<unknown, IKernelMessageLike>;
  };
}

/**
 * Watch one notebook's kernel: when a check run in it (from `check()` or the
 * inline panel) displays an attestation and this notebook is the model's,
 * the model reloads its ledger and writes the new head into the notebook's
 * `metadata.gradcheck` through the notebook model (the kernel never writes
 * the file). Returns a function that stops watching.
 */
export function watchKernelChecks(
  panel: IKernelPanelLike,
  isActive: () => boolean,
  model: IGradcheckModel
): () => void {
  const onMessage = (_sender: unknown, message: IKernelMessageLike) => {
    if (carriesAttestation(message) && isActive()) {
      void model.kernelAppended();
    }
  };
  panel.sessionContext.iopubMessage.connect(onMessage);
  return () => panel.sessionContext.iopubMessage.disconnect(onMessage);
}
