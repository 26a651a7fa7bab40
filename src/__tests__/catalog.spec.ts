/**
 * The Spanish catalog against the source: every string the front end passes
 * to `trans.__()` / `trans._n()` (found by scanning src/), and every title and
 * description of the settings schema, has a Spanish entry of the right shape,
 * and the catalog holds nothing that is no longer used.
 */
import {
  placeholders,
  readCatalog,
  schemaStrings,
  sourceStrings
} from './catalogSource';

describe('the Spanish catalog', () => {
  const catalog = readCatalog();
  const { strings, unreadable } = sourceStrings();

  it('is a Jed-style catalog of the jupyterlab_gradcheck domain, as JupyterLab language packs are', () => {
    // Given the header under the empty key
    const header = catalog[''];
    // Then it names the domain the front end loads, the language and its plural rule
    expect(header.domain).toBe('jupyterlab_gradcheck');
    expect(header.language).toBe('es-ES');
    expect(header.plural_forms).toBe('nplurals=2; plural=(n != 1);');
  });

  it('can read every translated string in the source', () => {
    // Given the calls of src/: a first argument that is not a literal could not be checked
    // Then there are such calls, and none that is not a literal
    expect(strings.length).toBeGreaterThan(100);
    expect(unreadable).toEqual([]);
  });

  it('has a Spanish entry for every trans.__() and trans._n() string of src/', () => {
    // When each string of the source is looked up
    const missing = strings
      .filter(s => !(s.msgid in catalog))
      .map(s => `${s.file}: ${JSON.stringify(s.msgid)}`);
    // Then none is missing
    expect(missing).toEqual([]);
  });

  it('has one form for a plain string and two for a plural, each keeping the placeholders', () => {
    for (const { msgid, plural } of strings) {
      // Given a string's entry
      const forms = catalog[msgid];
      if (!forms) {
        continue; // a missing entry is the test above's failure
      }
      // Then its shape matches the call, and each form carries the English placeholders
      expect({ msgid, forms: forms.length }).toEqual({
        msgid,
        forms: plural === null ? 1 : 2
      });
      for (const form of forms) {
        expect({ msgid, form, placeholders: placeholders(form) }).toEqual({
          msgid,
          form,
          placeholders: placeholders(plural ?? msgid)
        });
        expect(form.trim()).not.toBe('');
      }
    }
  });

  it('translates every title and description of the settings schema, in the schema context', () => {
    const missing = schemaStrings().filter(key => !(key in catalog));
    expect(missing).toEqual([]);
  });

  it('holds no entry that the source and the schema no longer use', () => {
    // Given every key the source and the schema use
    const used = new Set([
      ...strings.map(s => s.msgid),
      ...schemaStrings(),
      ''
    ]);
    // Then every key of the catalog is one of them
    expect(Object.keys(catalog).filter(key => !used.has(key))).toEqual([]);
  });
});
