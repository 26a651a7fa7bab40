/**
 * The project's own English messages, read from its two catalogs (the front
 * end's es_ES JSON and the Python .po), as the fragments a Spanish page must
 * not show: the literal runs of each message between its placeholders that
 * are long enough to be English sentences rather than code names, and whose
 * Spanish is different.
 */
import * as fs from 'fs';
import * as path from 'path';

const LOCALE = path.resolve(
  __dirname,
  '..',
  '..',
  'jupyterlab_gradcheck',
  'locale'
);

/** A fragment must be this long, with two words at least, to count as an English sentence. */
const MIN_FRAGMENT = 18;

function fragments(english: string): string[] {
  return english
    .split(/%\d+|\{[^{}]*\}|`[^`]*`|\n/)
    .map(part => part.trim().replace(/\s+/g, ' '))
    .filter(
      part =>
        part.length >= MIN_FRAGMENT &&
        /[a-z]{3,} [a-z]{2,}/.test(part) &&
        !/[<>=]/.test(part)
    );
}

function poEntries(): [string, string][] {
  const text = fs.readFileSync(
    path.join(LOCALE, 'es', 'LC_MESSAGES', 'jupyterlab_gradcheck.po'),
    'utf-8'
  );
  const unquote = (block: string): string =>
    block
      .split('\n')
      .map(line => line.trim())
      .filter(line => line.startsWith('"'))
      .map(line => JSON.parse(line) as string)
      .join('');
  const entries: [string, string][] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const id = /msgid ("(?:[^"\\]|\\.)*"(?:\s*\n\s*"(?:[^"\\]|\\.)*")*)/.exec(
      block
    );
    const str = /msgstr(?:\[0\])? ("(?:[^"\\]|\\.)*"(?:\s*\n\s*"(?:[^"\\]|\\.)*")*)/.exec(
      block
    );
    if (id && str) {
      entries.push([unquote(id[1]), unquote(str[1])]);
    }
  }
  return entries;
}

function jsonEntries(): [string, string][] {
  const catalog = JSON.parse(
    fs.readFileSync(
      path.join(LOCALE, 'es_ES', 'LC_MESSAGES', 'jupyterlab_gradcheck.json'),
      'utf-8'
    )
  ) as { [msgid: string]: string[] | object };
  return Object.entries(catalog)
    .filter(([msgid, forms]) => msgid && Array.isArray(forms))
    .map(([msgid, forms]) => [
      msgid.includes('\u0004') ? msgid.split('\u0004')[1] : msgid,
      (forms as string[])[0]
    ]);
}

/** Every English fragment of the project's catalogs whose Spanish differs. */
export function englishFragments(): string[] {
  const found = new Set<string>();
  for (const [english, spanish] of [...poEntries(), ...jsonEntries()]) {
    if (!english || !spanish || english === spanish) {
      continue;
    }
    for (const part of fragments(english)) {
      if (!spanish.includes(part)) {
        found.add(part);
      }
    }
  }
  return [...found];
}

/** The English fragments that `text` shows (empty: none). */
export function englishIn(text: string, fragmentsToFind: string[]): string[] {
  const folded = text.replace(/\s+/g, ' ');
  return fragmentsToFind.filter(part => folded.includes(part));
}
