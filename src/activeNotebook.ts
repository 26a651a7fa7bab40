/**
 * Keeps the model on the active notebook: the notebook tracker's current
 * notebook becomes the model's, and a change of notebook, or a rename of the
 * active one, reloads the model.
 */
import { ISignal } from '@lumino/signaling';

import { IMetadataOwner } from './binding';
import { IActiveNotebook, IGradcheckModel } from './tokens';

/** The part of a `NotebookPanel` the model needs. */
export interface INotebookPanelLike {
  readonly context: {
    readonly localPath: string;
    readonly pathChanged: ISignal<unknown, string>;
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
 * without reloading (the panel reloads when it is shown); later changes of
 * notebook and renames reload it. Returns a function that stops following.
 */
export function followActiveNotebook(tracker: INotebookTrackerLike, model: IGradcheckModel): () => void {
  let watched: INotebookPanelLike | null = null;
  const onPathChanged = () => void model.refresh();
  const watch = (panel: INotebookPanelLike | null) => {
    watched?.context.pathChanged.disconnect(onPathChanged);
    watched = panel;
    panel?.context.pathChanged.connect(onPathChanged);
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
    watched = null;
  };
}
