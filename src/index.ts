/**
 * The jupyterlab-gradcheck front end: the side panel's model (provided as
 * `IGradcheckModel`), a right-sidebar panel that renders it and follows the
 * active notebook, its palette commands, and its settings.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

/* eslint-disable jupyter/prefer-lazy-imports -- activation needs these at once: it builds the
   panel, registers the commands and follows the active notebook from the start. */
import {
  followActiveNotebook,
  watchKernelChecks,
  watchRenames
} from './activeNotebook';
import { requester } from './api';
import { addCommands } from './commands';
import { interfaceLanguage, useTranslator } from './i18n';
import { ISessionLike, tellKernelLanguage } from './kernelLanguage';
import { GradcheckModel } from './model';
import { GradcheckPanel } from './panel';
import { translatePlugin } from './schemaTranslation';
import { defaultsFrom } from './settings';
import { IGradcheckModel, PLUGIN_ID } from './tokens';
/* eslint-enable jupyter/prefer-lazy-imports */

export * from './tokens';

const plugin: JupyterFrontEndPlugin<IGradcheckModel> = {
  id: PLUGIN_ID,
  description:
    'Check PyTorch gradients honestly: expectation beside observation, in a tamper-evident ledger.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ISettingRegistry, ILayoutRestorer, ITranslator],
  provides: IGradcheckModel,
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ): IGradcheckModel => {
    // First, so every label, command and message below is in the user's language.
    useTranslator(translator ?? nullTranslator);
    const model = new GradcheckModel(requester);
    followActiveNotebook(tracker, model);
    const watchKernel = (notebook: NotebookPanel) => {
      const stop = watchKernelChecks(
        notebook,
        () => tracker.currentWidget === notebook,
        model
      );
      const stopRenames = watchRenames(notebook);
      const stopLanguage = tellKernelLanguage(
        notebook.sessionContext as unknown as ISessionLike,
        interfaceLanguage
      );
      notebook.disposed.connect(stop);
      notebook.disposed.connect(stopRenames);
      notebook.disposed.connect(stopLanguage);
    };
    tracker.forEach(watchKernel);
    tracker.widgetAdded.connect((_tracker, notebook) => watchKernel(notebook));
    const panel = new GradcheckPanel(model);
    app.shell.add(panel, 'right', { rank: 600 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }
    addCommands(app, panel, palette);
    if (settingRegistry) {
      // The schema sets jupyter.lab.transform: the registry loads it once this transform is there.
      settingRegistry.transform(PLUGIN_ID, { fetch: translatePlugin });
      settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const update = () =>
            model.setDefaults(
              defaultsFrom(settings.composite as { [key: string]: unknown })
            );
          update();
          settings.changed.connect(update);
        })
        .catch(reason => {
          console.error(
            'jupyterlab-gradcheck: could not load settings',
            reason
          );
        });
    }
    return model;
  }
};

export default plugin;
