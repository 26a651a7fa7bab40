/**
 * The palette commands: open the panel, export the ledger, verify the ledger.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { el } from './dom';
import { GradcheckPanel } from './panel';
import { EXPORT_FORMATS, ExportFormat } from './requester';
import { CommandIDs } from './tokens';

const CATEGORY = 'Gradient check';

/** Ask which export format to download; null when cancelled. */
async function pickFormat(): Promise<ExportFormat | null> {
  const select = el('select', { class: 'jp-mod-styled', testid: 'gradcheck-export-dialog-format' }, EXPORT_FORMATS.map(f => el('option', { value: f }, f.toUpperCase())));
  const body = new Widget({ node: el('div', {}, el('p', {}, 'Download the active notebook\'s ledger as:'), select) });
  const result = await showDialog({
    title: 'Export ledger',
    body,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Download' })]
  });
  return result.button.accept ? (select.value as ExportFormat) : null;
}

/** Register the commands and put them in the palette. */
export function addCommands(app: JupyterFrontEnd, panel: GradcheckPanel, palette: ICommandPalette | null): void {
  const { commands, shell } = app;
  const open = () => {
    if (!panel.isAttached) {
      shell.add(panel, 'right', { rank: 600 });
    }
    shell.activateById(panel.id);
  };
  commands.addCommand(CommandIDs.open, {
    label: 'Gradient check: open panel',
    caption: 'Show the gradient checks of the active notebook',
    icon: args => (args['isPalette'] ? undefined : panel.title.icon),
    execute: open
  });
  commands.addCommand(CommandIDs.export, {
    label: 'Gradient check: export ledger',
    caption: 'Download the active notebook\'s ledger as CSV, HTML or JSON',
    execute: async args => {
      const given = args['format'] as string | undefined;
      const format = EXPORT_FORMATS.includes(given as ExportFormat) ? (given as ExportFormat) : await pickFormat();
      if (format) {
        await panel.exportLedger(format);
      }
    }
  });
  commands.addCommand(CommandIDs.verify, {
    label: 'Gradient check: verify ledger',
    caption: 'Check the active notebook\'s ledger chain and its binding, and show the result',
    execute: async () => {
      open();
      await panel.verify();
    }
  });
  if (palette) {
    for (const command of Object.values(CommandIDs)) {
      palette.addItem({ command, category: CATEGORY, args: { isPalette: true } });
    }
  }
}
