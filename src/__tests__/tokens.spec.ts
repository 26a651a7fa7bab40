/**
 * The public ids: settings, the UI tests and users' shortcuts name them, so
 * their values must not change.
 */
import { CommandIDs, IGradcheckModel, PANEL_ID, PLUGIN_ID } from '../tokens';

describe('tokens', () => {
  it('keeps the command ids, each one distinct', () => {
    const ids = Object.values(CommandIDs);
    expect(new Set(ids).size).toBe(ids.length);
    expect(CommandIDs).toEqual({
      open: 'jupyterlab-gradcheck:open-panel',
      export: 'jupyterlab-gradcheck:export-ledger',
      verify: 'jupyterlab-gradcheck:verify-ledger'
    });
  });

  it('keeps the plugin and panel ids, distinct from the commands', () => {
    expect(PLUGIN_ID).toBe('jupyterlab-gradcheck:plugin');
    expect(PANEL_ID).toBe('jupyterlab-gradcheck:panel');
    expect(Object.values(CommandIDs)).not.toContain(PANEL_ID);
  });

  it('names the model token after the extension', () => {
    expect(IGradcheckModel.name).toBe('jupyterlab-gradcheck:IGradcheckModel');
  });
});
