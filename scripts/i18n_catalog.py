"""The Python catalog: find every message the package shows, keep the .po in step, compile the .mo.

    python scripts/i18n_catalog.py           # compile the .po into the .mo beside it
    python scripts/i18n_catalog.py --update  # add the messages the .po lacks (empty msgstr), then compile
    python scripts/i18n_catalog.py --check   # exit 1 when a message lacks Spanish or the .mo is stale,
                                             # or a front-end string lacks its es_ES entry

A message is the first argument, a string literal, of `_()`, `N_()`, `Message()`,
`Message.one_line()`, `ngettext()` (both forms), or of an error class of the package
(`SpecError("...", name=value)`): errors carry their English template and translate when shown.
Standard library only, so the .mo can be rebuilt anywhere the package runs.
"""

from __future__ import annotations

import ast
import json
import re
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jupyterlab_gradcheck"
PO = PACKAGE / "locale" / "es" / "LC_MESSAGES" / "jupyterlab_gradcheck.po"
MO = PO.with_suffix(".mo")
#: The front end's Spanish catalog (Jed JSON, where jupyterlab_server looks) and its sources.
FRONT_END_CATALOG = PACKAGE / "locale" / "es_ES" / "LC_MESSAGES" / "jupyterlab_gradcheck.json"
FRONT_END_SOURCES = ROOT / "src"
#: Parts of the package whose text is not translated, each with the reason.
NOT_TRANSLATED = {
    # REST answers come in the reader's language (Accept-Language); the parts of server/ named in
    # TRANSLATED_INSIDE are in the catalog, the pool's and the worker's own failures not yet
    "server": "the pool's and the worker's own failures are not yet templates",
    "witness": "the witness service answers stay English",
}
#: Parts inside an excluded part that are translated all the same.
TRANSLATED_INSIDE = (
    "server/handlers.py",
    "server/errors.py",
    "server/service.py",
    "witness/log.py",
    "witness/client.py",
    "witness/verify.py",
)
#: The modules that hold the translation machinery itself (they pass templates on, not text).
MACHINERY = {"core/i18n.py", "core/errors.py"}
MARKERS = {"_", "N_", "Message", "one_line"}
BASE_ERRORS = {"GradcheckError"}


def package_files(include_excluded: bool = False) -> list[Path]:
    files = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        excluded = any(relative.startswith(part + "/") for part in NOT_TRANSLATED)
        if include_excluded or not excluded or relative.startswith(TRANSLATED_INSIDE):
            files.append(path)
    return files


def error_classes(files: list[Path]) -> set[str]:
    """Every class of the package that derives, at any depth, from GradcheckError."""
    bases = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
    found = set(BASE_ERRORS)
    while True:
        more = {name for name, parents in bases.items() if parents & found} - found
        if not more:
            return found
        found |= more


def call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def messages_of(path: Path, errors: set[str]):
    """(msgid, msgid_plural or None, line) for every marked message in one file, and the
    (line, what) of every message call whose text is not a literal (so not in the catalog)."""
    found, unrouted = [], []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        if name == "ngettext" and len(node.args) >= 2:
            singular, plural = node.args[0], node.args[1]
            if all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in (singular, plural)):
                found.append((singular.value, plural.value, node.lineno))
            else:
                unrouted.append((node.lineno, "ngettext"))
            continue
        if name not in MARKERS and name not in errors:
            continue
        if not node.args or (name == "_" and not isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
            continue  # _(word) translates a word marked with N_ where it is written
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((first.value, None, node.lineno))
        elif name in errors and _passed_on(first):
            continue
        else:
            unrouted.append((node.lineno, f"{name}({ast.unparse(first)[:60]})"))
    return found, unrouted


def printed_text(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every `print()` whose argument is text written in place, not through `_()`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and call_name(node) == "print":
            for arg in node.args:
                parts = [arg] if isinstance(arg, ast.Constant) else arg.values if isinstance(arg, ast.JoinedStr) else []
                if any(
                    isinstance(p, ast.Constant) and isinstance(p.value, str) and any(c.isalpha() for c in p.value)
                    for p in parts
                ):
                    found.append((node.lineno, f"print({ast.unparse(arg)[:60]})"))
    return found


#: Keyword arguments whose text a widget shows a person (ipywidgets' label, hint and tooltip).
WIDGET_TEXT = {"description", "placeholder", "tooltip"}


def widget_text(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every widget label, placeholder or tooltip written as English words in
    place (two words at least), not through `_()`: a field name (`rtol`) or an example of JSON
    (`{"x": 3}`) is not words."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                value = keyword.value
                if (
                    keyword.arg in WIDGET_TEXT
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", value.value)
                ):
                    found.append((node.lineno, f"{keyword.arg}={value.value[:60]!r}"))
    return found


def _passed_on(node) -> bool:
    """An error built from another error's message (`SpecError(exc.message)`) keeps its template."""
    return isinstance(node, ast.Attribute) and node.attr == "message"


def extract() -> dict[tuple[str, str | None], list[str]]:
    """Every message of the translated parts of the package, with where it is written."""
    files = package_files()
    errors = error_classes(package_files(include_excluded=True))
    catalog: dict = {}
    for path in files:
        for msgid, plural, line in messages_of(path, errors)[0]:
            if msgid:
                catalog.setdefault((msgid, plural), []).append(f"{path.relative_to(ROOT).as_posix()}:{line}")
    return catalog


def unrouted() -> list[str]:
    """`path:line what` of every message call whose text cannot be in the catalog."""
    errors = error_classes(package_files(include_excluded=True))
    found = []
    for path in package_files():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in MACHINERY:
            continue
        places = messages_of(path, errors)[1] + (printed_text(path) if relative.startswith("cli/") else [])
        places += widget_text(path) if relative.startswith("widget/") else []
        found += [f"{path.relative_to(ROOT).as_posix()}:{line} {what}" for line, what in places]
    return found


# ------------------------------------------------------------------------------ the .po file
def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _unquote(token: str) -> str:
    return ast.literal_eval(token)


def read_po(path: Path = PO) -> list[dict]:
    """The entries of a .po file: msgid, msgid_plural, msgstr (a list for plurals), comments."""
    entries, entry, key = [], None, None

    def close():
        if entry is not None and "msgid" in entry:
            entries.append(entry)

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            close()
            entry, key = None, None
            continue
        if entry is None:
            entry = {"comments": [], "msgstr": {}}
        if line.startswith("#"):
            entry["comments"].append(raw)
            continue
        if line.startswith('"'):
            text = _unquote(line)
            if isinstance(key, int):
                entry["msgstr"][key] += text
            else:
                entry[key] += text
            continue
        word, _, rest = line.partition(" ")
        if word.startswith("msgstr["):
            key = int(word[7:-1])
            entry["msgstr"][key] = _unquote(rest)
        elif word == "msgstr":
            key = 0
            entry["msgstr"][0] = _unquote(rest)
        else:
            key = word
            entry[word] = _unquote(rest)
    close()
    return entries


def write_po(entries: list[dict], path: Path = PO) -> None:
    blocks = []
    for entry in entries:
        lines = list(entry.get("comments") or [])
        lines.append(f"msgid {_quote(entry['msgid'])}")
        if entry.get("msgid_plural") is not None:
            lines.append(f"msgid_plural {_quote(entry['msgid_plural'])}")
            lines += [f"msgstr[{n}] {_quote(entry['msgstr'].get(n, ''))}" for n in (0, 1)]
        else:
            lines.append(f"msgstr {_quote(entry['msgstr'].get(0, ''))}")
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def update(catalog: dict | None = None) -> int:
    """Add the messages the .po lacks (untranslated), drop those no longer written, refresh
    every location comment."""
    catalog = extract() if catalog is None else catalog
    entries = [e for e in read_po() if not e["msgid"] or (e["msgid"], e.get("msgid_plural")) in catalog]
    known = {(e["msgid"], e.get("msgid_plural")): e for e in entries}
    added = 0
    for (msgid, plural), places in catalog.items():
        entry = known.get((msgid, plural))
        if entry is None:
            entry = {"comments": [], "msgid": msgid, "msgid_plural": plural, "msgstr": {}}
            entries.append(entry)
            added += 1
        entry["comments"] = [c for c in entry["comments"] if not c.startswith("#:")] + [
            f"#: {place}" for place in places[:3]
        ]
    write_po(entries)
    return added


# ------------------------------------------------------------------------------ the .mo file
def compile_mo(entries: list[dict]) -> bytes:
    """The GNU .mo bytes of the translated entries (untranslated ones fall back to English)."""
    pairs = {}
    for entry in entries:
        if entry.get("msgid_plural") is not None:
            forms = [entry["msgstr"].get(n, "") for n in sorted(entry["msgstr"])]
            if all(forms):
                pairs[entry["msgid"] + "\0" + entry["msgid_plural"]] = "\0".join(forms)
        elif entry["msgstr"].get(0) or entry["msgid"] == "":
            pairs[entry["msgid"]] = entry["msgstr"].get(0, "")
    keys = sorted(pairs)
    ids = b"".join(k.encode("utf-8") + b"\0" for k in keys)
    strs = b"".join(pairs[k].encode("utf-8") + b"\0" for k in keys)
    offsets, id_pos, str_pos = [], 0, 0
    for key in keys:
        k, v = key.encode("utf-8"), pairs[key].encode("utf-8")
        offsets.append((id_pos, len(k), str_pos, len(v)))
        id_pos += len(k) + 1
        str_pos += len(v) + 1
    start = 7 * 4 + 16 * len(keys)
    id_table = b"".join(struct.pack("<2I", length, start + pos) for pos, length, _p, _l in offsets)
    str_start = start + len(ids)
    str_table = b"".join(struct.pack("<2I", length, str_start + pos) for _i, _k, pos, length in offsets)
    header = struct.pack("<7I", 0x950412DE, 0, len(keys), 7 * 4, 7 * 4 + 8 * len(keys), 0, 0)
    return header + id_table + str_table + ids + strs


def problems() -> list[str]:
    """What keeps the catalog from being complete and honest (empty: nothing)."""
    entries = read_po()
    translated = {
        (e["msgid"], e.get("msgid_plural")) for e in entries if e["msgid"] and e["msgstr"] and all(e["msgstr"].values())
    }
    found = [
        f"no Spanish for {msgid!r} ({places[0]})"
        for (msgid, plural), places in extract().items()
        if (msgid, plural) not in translated
    ]
    if not MO.is_file() or MO.read_bytes() != compile_mo(entries):
        found.append(
            f"{MO.relative_to(ROOT).as_posix()} is not the compiled {PO.name}: run python scripts/i18n_catalog.py"
        )
    return found + [f"not through the catalog: {place}" for place in unrouted()]


# ------------------------------------------------------------------------------ the front end
_LITERAL = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_TRANS_CALL = re.compile(rf"trans\.(__|_n)\(\s*({_LITERAL})")


def _js_string(literal: str) -> str:
    body = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def front_end_strings() -> dict[str, str]:
    """Every `trans.__()` / `trans._n()` string literal of src/*.ts (not the tests), with its file."""
    found = {}
    for path in sorted(FRONT_END_SOURCES.glob("*.ts")):
        text = re.sub(r"/\*[\s\S]*?\*/", "", path.read_text(encoding="utf-8"))
        text = re.sub(r"(?m)^\s*//.*$", "", text)
        for match in _TRANS_CALL.finditer(text):
            found.setdefault(_js_string(match.group(2)), f"src/{path.name}")
    return found


def front_end_problems() -> list[str]:
    """The front-end strings that have no Spanish in the es_ES catalog."""
    if not FRONT_END_SOURCES.is_dir():
        return []
    catalog = json.loads(FRONT_END_CATALOG.read_text(encoding="utf-8"))
    return [
        f"no Spanish for {msgid!r} ({place})"
        for msgid, place in front_end_strings().items()
        if not (isinstance(catalog.get(msgid), list) and all(catalog[msgid]))
    ]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        found = problems() + front_end_problems()
        print("\n".join(found) or "catalog complete", file=sys.stderr if found else sys.stdout)
        return 1 if found else 0
    if "--update" in argv:
        print(f"{update()} message(s) added to {PO.relative_to(ROOT)}")
    MO.write_bytes(compile_mo(read_po()))
    print(f"wrote {MO.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
