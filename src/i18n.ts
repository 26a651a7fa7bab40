/**
 * The front end's one translation bundle, domain `jupyterlab_gradcheck`.
 *
 * Every shown string goes through `trans.__()` / `trans._n()` / `trans._p()`,
 * with the English text as its key, so the Spanish catalog
 * (jupyterlab_gradcheck/locale/es_ES/LC_MESSAGES/jupyterlab_gradcheck.json)
 * can be checked against the source by a test. The plugin hands JupyterLab's
 * `ITranslator` (or `nullTranslator`) to `useTranslator` on activation; until
 * then, and in the unit tests, the English text is used with its `%1`
 * placeholders filled, as JupyterLab's own null bundle does.
 *
 * Only types are imported from `@jupyterlab/translation`, so the modules that
 * render text stay loadable under jest without JupyterLab's ES modules.
 */
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';

/** The translation domain: the Python package name, as jupyterlab_server's `jupyterlab.locale` entry point names it. */
export const DOMAIN = 'jupyterlab_gradcheck';

/** Fill `%1`, `%2`, ... with the arguments, as JupyterLab's Gettext.strfmt does. */
export function fill(text: string, ...args: unknown[]): string {
  return text.replace(/%(\d+)/g, (whole, index: string) => {
    const value = args[Number(index) - 1];
    return value === undefined ? whole : String(value);
  });
}

/** The English bundle used before a translator is given. */
const english: Pick<TranslationBundle, '__' | '_n' | '_p'> = {
  __: (msgid: string, ...args: unknown[]) => fill(msgid, ...args),
  _n: (msgid: string, plural: string, n: number, ...args: unknown[]) =>
    fill(n === 1 ? msgid : plural, n, ...args),
  _p: (_context: string, msgid: string, ...args: unknown[]) =>
    fill(msgid, ...args)
};

let bundle: Pick<TranslationBundle, '__' | '_n' | '_p'> = english;

/** Translate through `translator` from now on (null: English again). */
export function useTranslator(translator: ITranslator | null): void {
  bundle = translator ? translator.load(DOMAIN) : english;
  useLanguageOf(translator);
}

/**
 * The bundle in force. Its methods look the bundle up on each call, so text
 * built after activation is translated whichever module imported it first.
 */
export const trans = {
  /** Translate `msgid`, filling `%1`, `%2`, ... with `args`. */
  __: (msgid: string, ...args: unknown[]): string => bundle.__(msgid, ...args),
  /** Singular or plural of `msgid` for `n`; `%1` is `n`, `%2`, ... are `args`. */
  _n: (msgid: string, plural: string, n: number, ...args: unknown[]): string =>
    bundle._n(msgid, plural, n, ...args),
  /** Translate `msgid` in a context (`schema` for the settings' titles and descriptions). */
  _p: (context: string, msgid: string, ...args: unknown[]): string =>
    bundle._p(context, msgid, ...args)
};

let languageCode = 'en';

/**
 * JupyterLab's interface language as an HTTP language tag (`es-ES`, `en`):
 * what every REST call sends as `Accept-Language`, so the server answers
 * its messages, reports and exports in it.
 */
export function interfaceLanguage(): string {
  return languageCode;
}

/** Record the interface language of `translator` (null: English). */
export function useLanguageOf(translator: ITranslator | null): void {
  const code = translator?.languageCode;
  languageCode =
    typeof code === 'string' && code && code !== 'default'
      ? code.replace(/_/g, '-')
      : 'en';
}

/** English texts of records (kept English) and their translations, as the server's `shown` gave them. */
const shownTexts = new Map<string, string>();

/** Remember the translations an answer's `shown` carries. */
export function learnShown(shown: unknown): void {
  if (shown && typeof shown === 'object' && !Array.isArray(shown)) {
    for (const [english, text] of Object.entries(shown)) {
      if (typeof text === 'string') {
        shownTexts.set(english, text);
      }
    }
  }
}

/**
 * A text a record keeps in English (a diagnosis reason, a device's reason)
 * in the reader's language when the server has given its translation;
 * itself otherwise.
 */
export function shownText(text: string): string {
  return shownTexts.get(text) ?? text;
}
