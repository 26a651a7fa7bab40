/**
 * The palette commands: open the panel, export the ledger, verify the ledger.
 * Their palette ranks (tokens.ts `PALETTE_RANKS`) put opening the panel first.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { el } from './dom';
import { trans } from './i18n';
import { GradcheckPanel } from './panel';
import { EXPORT_FORMATS, ExportFormat } from './requester';
import { CommandIDs, PALETTE_RANKS } from './tokens';

/** Ask which export format to download; null when cancelled. */
async function pickFormat(): Promise<ExportFormat | null> {
  const select = el(
    'select',
    { class: 'jp-mod-styled', testid: 'gradcheck-export-dialog-format' },
    EXPORT_FORMATS.map(f => el('option', { value: f }, f.toUpperCase()))
  );
  const body = new Widget({
    node: el(
      'div',
      {},
      el('p', {}, trans.__("Download the active notebook's ledger as:")),
      select
    )
  });
  const result = await showDialog({
    title: trans.__('Export ledger'),
    body,
    buttons: [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      Dialog.okButton({ label: trans.__('Download') })
    ]
  });
  return result.button.accept ? (select.value as ExportFormat) : null;
}

/** The description of a command that takes no arguments. */
const NO_ARGS = { args: { type: 'object' as const, properties: {} } };

/** Register the commands and put them in the palette. */
export function addCommands(
  app: JupyterFrontEnd,
  panel: GradcheckPanel,
  palette: ICommandPalette | null
): void {
  const { commands, shell } = app;
  const open = () => {
    if (!panel.isAttached) {
      shell.add(panel, 'right', { rank: 600 });
    }
    shell.activateById(panel.id);
  };
  commands.addCommand(CommandIDs.open, {
    label: trans.__('Gradient check: open panel'),
    caption: trans.__('Show the gradient checks of the active notebook'),
    icon: args => (args['isPalette'] ? undefined : panel.title.icon),
    describedBy: NO_ARGS,
    execute: open
  });
  commands.addCommand(CommandIDs.export, {
    label: trans.__('Gradient check: export ledger'),
    caption: trans.__(
      "Download the active notebook's ledger as CSV, HTML or JSON"
    ),
    describedBy: {
      args: {
        type: 'object',
        properties: {
          format: { type: 'string', enum: [...EXPORT_FORMATS] }
        }
      }
    },
    execute: async args => {
      const given = args['format'] as string | undefined;
      const format = EXPORT_FORMATS.includes(given as ExportFormat)
        ? (given as ExportFormat)
        : await pickFormat();
      if (format) {
        await panel.exportLedger(format);
      }
    }
  });
  commands.addCommand(CommandIDs.verify, {
    label: trans.__('Gradient check: verify ledger'),
    caption: trans.__(
      "Check the active notebook's ledger chain and its binding, and show the result"
    ),
    describedBy: NO_ARGS,
    execute: async () => {
      open();
      await panel.verify();
    }
  });
  if (palette) {
    const category = trans.__('Gradient check');
    for (const [name, command] of Object.entries(CommandIDs) as [
      keyof typeof CommandIDs,
      string
    ][]) {
      palette.addItem({
        command,
        category,
        rank: PALETTE_RANKS[name],
        args: { isPalette: true }
      });
    }
  }
}
