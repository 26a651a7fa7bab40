/**
 * The settings' titles and descriptions (schema/plugin.json) in the user's
 * language, shown by the Settings Editor.
 *
 * jupyterlab_server translates schemas only from a language pack's gettext
 * files, not from an extension's own catalog, so the plugin translates its
 * schema in the front end: the schema sets `jupyter.lab.transform`, and the
 * plugin registers `translateSchema` as the settings registry's fetch
 * transform. The strings are looked up in the `schema` context, the way
 * JupyterLab's language packs key them (`"schema\u0004Default dtype"`).
 */
import type { ISettingRegistry } from '@jupyterlab/settingregistry';

import { trans } from './i18n';

type Schema = { [key: string]: unknown };

/** The keys whose string values are shown to the user. */
const SHOWN = ['title', 'description'];

/** A copy of `schema` with every title and description translated, at any depth. */
export function translateSchema<S extends Schema>(schema: S): S {
  const copy: Schema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (typeof value === 'string' && SHOWN.includes(key)) {
      // eslint-disable-next-line jupyter/no-dynamic-translation -- the schema's own strings, keyed as the language packs key them
      copy[key] = trans._p('schema', value);
    } else if (value && typeof value === 'object' && !Array.isArray(value)) {
      copy[key] = translateSchema(value as Schema);
    } else {
      copy[key] = value;
    }
  }
  return copy as S;
}

/** The registry's fetch transform: the plugin with its schema translated. */
export function translatePlugin(
  plugin: ISettingRegistry.IPlugin
): ISettingRegistry.IPlugin {
  return { ...plugin, schema: translateSchema(plugin.schema) };
}
