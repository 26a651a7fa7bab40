/**
 * A translator over the shipped Spanish catalog, the way JupyterLab's does
 * once the es_ES language pack is chosen; a missing entry shows the English,
 * as JupyterLab's would. Not a spec: a helper for the specs.
 */
import type { ITranslator } from '@jupyterlab/translation';

import { fill } from '../i18n';
import { readCatalog } from './catalogSource';

/** The Spanish translator. */
export function spanish(): ITranslator {
  const catalog = readCatalog();
  const bundle = {
    __: (msgid: string, ...args: unknown[]) =>
      fill(catalog[msgid]?.[0] ?? msgid, ...args),
    _n: (msgid: string, plural: string, n: number, ...args: unknown[]) =>
      fill(
        catalog[msgid]?.[n === 1 ? 0 : 1] ?? (n === 1 ? msgid : plural),
        n,
        ...args
      ),
    _p: (context: string, msgid: string, ...args: unknown[]) =>
      fill(catalog[`${context}\u0004${msgid}`]?.[0] ?? msgid, ...args)
  };
  return {
    languageCode: 'es-ES',
    load: () => bundle
  } as unknown as ITranslator;
}
