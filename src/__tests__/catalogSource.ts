/**
 * Reading the translatable strings out of the front end's source text and the
 * settings schema, and the Spanish catalog they must be in. Shared by the
 * catalog tests; the strings are found by scanning the text, so a string
 * added to src/ without a Spanish entry fails a test without running the panel.
 */
/// <reference types="node" />
import * as fs from 'fs';
import * as path from 'path';

/** The repository root. */
export const ROOT = path.resolve(__dirname, '..', '..');

/** The Spanish catalog, where jupyterlab_server's `jupyterlab.locale` entry point looks for it. */
export const CATALOG_PATH = path.join(
  ROOT,
  'jupyterlab_gradcheck',
  'locale',
  'es_ES',
  'LC_MESSAGES',
  'jupyterlab_gradcheck.json'
);

/** A catalog: the header under '', then msgid -> [translation] or [singular, plural]. */
export type Catalog = { [msgid: string]: string[] } & {
  '': { [key: string]: string };
};

/** One translatable string of the source: the msgid, its plural when it has one, and where it is. */
export interface ISourceString {
  msgid: string;
  plural: string | null;
  file: string;
}

const LITERAL = String.raw`(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")`;
const CALL = new RegExp(
  String.raw`trans\.(__|_n)\(\s*(${LITERAL})(?:\s*,\s*(${LITERAL}))?`,
  'g'
);
const ANY_CALL = /trans\.(__|_n)\(/g;

/** The value of a JavaScript string literal. */
function unquote(literal: string): string {
  return new Function(`return ${literal};`)() as string;
}

/** The TypeScript files of src/ (not the tests). */
export function sourceFiles(): string[] {
  const dir = path.join(ROOT, 'src');
  return fs
    .readdirSync(dir)
    .filter(name => name.endsWith('.ts'))
    .map(name => path.join(dir, name));
}

/**
 * Every `trans.__()` / `trans._n()` string of src/, and the calls whose first
 * argument is not a string literal (which no catalog can be checked against).
 */
export function sourceStrings(): {
  strings: ISourceString[];
  unreadable: string[];
} {
  const strings: ISourceString[] = [];
  const unreadable: string[] = [];
  for (const file of sourceFiles()) {
    // Comments may name the calls (`trans.__()`): only code is read.
    const text = fs
      .readFileSync(file, 'utf-8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    const name = path.basename(file);
    let found = 0;
    for (const match of text.matchAll(CALL)) {
      found += 1;
      const plural = match[1] === '_n' && match[3] ? unquote(match[3]) : null;
      strings.push({ msgid: unquote(match[2]), plural, file: name });
    }
    const calls = [...text.matchAll(ANY_CALL)].length;
    if (calls !== found) {
      unreadable.push(
        `${name}: ${calls - found} call(s) without a literal string`
      );
    }
  }
  return { strings, unreadable };
}

/** Every title and description of the settings schema, as the `schema` context keys them. */
export function schemaStrings(): string[] {
  const schema = JSON.parse(
    fs.readFileSync(path.join(ROOT, 'schema', 'plugin.json'), 'utf-8')
  );
  const found: string[] = [];
  const walk = (node: unknown): void => {
    if (node && typeof node === 'object' && !Array.isArray(node)) {
      for (const [key, value] of Object.entries(node)) {
        if (
          (key === 'title' || key === 'description') &&
          typeof value === 'string'
        ) {
          found.push(`schema\u0004${value}`);
        } else {
          walk(value);
        }
      }
    }
  };
  walk(schema);
  return found;
}

/** The Spanish catalog as shipped. */
export function readCatalog(): Catalog {
  return JSON.parse(fs.readFileSync(CATALOG_PATH, 'utf-8')) as Catalog;
}

/** The `%1`, `%2`, ... placeholders of a string, sorted. */
export function placeholders(text: string): string[] {
  return [...new Set(text.match(/%\d+/g) ?? [])].sort();
}
