/**
 * The jupyterlab-gradcheck front end: a right-sidebar panel that follows the
 * active notebook, its palette commands, and its settings.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { addCommands } from './commands';
import { GradcheckPanel } from './panel';
import { defaultsFrom } from './settings';

const PLUGIN_ID = 'jupyterlab-gradcheck:plugin';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Check PyTorch gradients honestly: expectation beside observation, in a tamper-evident ledger.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ISettingRegistry, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null
  ) => {
    const panel = new GradcheckPanel(tracker);
    app.shell.add(panel, 'right', { rank: 600 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }
    addCommands(app, panel, palette);
    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const update = () => panel.setDefaults(defaultsFrom(settings.composite as { [key: string]: unknown }));
          update();
          settings.changed.connect(update);
        })
        .catch(reason => {
          console.error('jupyterlab-gradcheck: could not load settings', reason);
        });
    }
  }
};

export default plugin;
