/**
 * Following the active notebook: the tracker's current notebook becomes the
 * model's, and switching or renaming reloads the model.
 */
import { Signal } from '@lumino/signaling';

import {
  INotebookPanelLike,
  activeNotebook,
  followActiveNotebook,
  watchRenames
} from '../activeNotebook';
import { GradcheckModel } from '../model';
import { FakeMetadata, fakeRequester } from './fakes';

class FakePanel implements INotebookPanelLike {
  constructor(path: string) {
    this.context = {
      localPath: path,
      pathChanged: new Signal<unknown, string>(this),
      saveState: new Signal<unknown, string>(this),
      save: jest.fn(async () => undefined)
    };
  }
  context: {
    localPath: string;
    pathChanged: Signal<unknown, string>;
    saveState: Signal<unknown, string>;
    save: jest.Mock;
  };
  model: (FakeMetadata & { dirty: boolean }) | null = Object.assign(
    new FakeMetadata(),
    { dirty: false }
  );
}

class FakeTracker {
  currentWidget: FakePanel | null = null;
  readonly currentChanged = new Signal<FakeTracker, FakePanel | null>(this);
  activate(panel: FakePanel | null): void {
    this.currentWidget = panel;
    this.currentChanged.emit(panel);
  }
}

function setup(initial: FakePanel | null) {
  const tracker = new FakeTracker();
  tracker.currentWidget = initial;
  const model = new GradcheckModel(fakeRequester());
  const refresh = jest.spyOn(model, 'refresh').mockResolvedValue(undefined);
  const stop = followActiveNotebook(tracker, model);
  return { tracker, model, refresh, stop };
}

describe('followActiveNotebook', () => {
  it('takes the current notebook at once, without reloading before the panel is shown', () => {
    const { model, refresh } = setup(new FakePanel('work/lab1.ipynb'));
    expect(model.notebookPath).toBe('work/lab1.ipynb');
    expect(refresh).not.toHaveBeenCalled();
  });

  it('follows a switch of notebook, forgets the last verify, and reloads', async () => {
    // Given lab1 active with a verify result shown
    const lab1 = new FakePanel('work/lab1.ipynb');
    const { tracker, model, refresh } = setup(lab1);
    await model.verify();
    expect(model.verification.state).toBe('done');
    refresh.mockClear();
    // When lab2 becomes active
    tracker.activate(new FakePanel('work/lab2.ipynb'));
    // Then the model is on lab2, without lab1's verify, and reloads
    expect(model.notebookPath).toBe('work/lab2.ipynb');
    expect(model.verification).toEqual({ state: 'none' });
    expect(refresh).toHaveBeenCalledTimes(1);
    // And closing every notebook leaves it on none
    tracker.activate(null);
    expect(model.notebookPath).toBeNull();
    expect(refresh).toHaveBeenCalledTimes(2);
  });

  it('reloads and rebinds when the active notebook is renamed, and no longer for one that was left', () => {
    const lab1 = new FakePanel('work/lab1.ipynb');
    const { tracker, model, refresh, stop } = setup(lab1);
    // When lab1 is renamed, its new path is read live
    lab1.context.localPath = 'work/renamed.ipynb';
    const rebind = jest.spyOn(model, 'notebookRenamed');
    lab1.context.pathChanged.emit('work/renamed.ipynb');
    expect(model.notebookPath).toBe('work/renamed.ipynb');
    expect(rebind).toHaveBeenCalledTimes(1);
    expect(refresh).toHaveBeenCalledTimes(1);
    // When another notebook is active, renaming lab1 does nothing
    tracker.activate(new FakePanel('work/lab2.ipynb'));
    lab1.context.pathChanged.emit('work/again.ipynb');
    expect(refresh).toHaveBeenCalledTimes(2);
    // And after stopping, nothing is followed
    stop();
    tracker.activate(lab1);
    expect(model.notebookPath).toBe('work/lab2.ipynb');
    expect(refresh).toHaveBeenCalledTimes(2);
  });
});

describe('followActiveNotebook and saves', () => {
  it('reloads once a save of the active notebook completed, not when it starts or fails', () => {
    const lab1 = new FakePanel('work/lab1.ipynb');
    const { refresh, stop } = setup(lab1);
    lab1.context.saveState.emit('started');
    lab1.context.saveState.emit('failed');
    expect(refresh).not.toHaveBeenCalled();
    lab1.context.saveState.emit('completed');
    expect(refresh).toHaveBeenCalledTimes(1);
    stop();
    lab1.context.saveState.emit('completed');
    expect(refresh).toHaveBeenCalledTimes(1);
  });
});

describe('watchRenames', () => {
  it("names the moved ledger in a renamed notebook's binding, until it stops", () => {
    // Given an open notebook bound to Untitled's ledger
    const panel = new FakePanel('Untitled.ipynb');
    panel.model!.setMetadata('gradcheck', {
      ledger: 'Untitled.gradcheck.jsonl',
      entries: 2,
      head: 'h2'
    });
    const stop = watchRenames(panel);
    // When it is renamed on its first save
    panel.context.pathChanged.emit('lab1.ipynb');
    // Then its binding names the ledger the server moved beside lab1.ipynb
    expect(panel.model!.getMetadata('gradcheck')).toEqual({
      ledger: 'lab1.gradcheck.jsonl',
      entries: 2,
      head: 'h2'
    });
    // And once stopped, a rename changes nothing
    stop();
    panel.context.pathChanged.emit('final.ipynb');
    expect(
      (panel.model!.getMetadata('gradcheck') as { ledger: string }).ledger
    ).toBe('lab1.gradcheck.jsonl');
  });
});

describe('activeNotebook', () => {
  it("reads the panel's path, metadata and dirty flag live, and saves through its context", async () => {
    const panel = new FakePanel('lab1.ipynb');
    const notebook = activeNotebook(panel);
    expect(notebook.dirty).toBe(false);
    panel.model!.dirty = true;
    expect(notebook.dirty).toBe(true);
    expect(notebook.metadata).toBe(panel.model);
    await notebook.save();
    expect(panel.context.save).toHaveBeenCalledTimes(1);
    panel.model = null;
    expect(notebook.metadata).toBeNull();
    expect(notebook.dirty).toBe(false);
  });
});
