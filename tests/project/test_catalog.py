"""The Spanish catalog of the Python surfaces is complete and honest.

Every message the package shows, `_()`, `N_()`, `Message()` and the English template of every
error of the package, has a Spanish entry; the committed .mo is the compiled .po; and no error
or CLI print writes its text in place (an f-string) where the catalog cannot see it. The parts
left in English are named in scripts/i18n_catalog.py NOT_TRANSLATED, each with its reason.
"""

from __future__ import annotations

import importlib.util
import os
import string
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _catalog_tool():
    spec = importlib.util.spec_from_file_location("i18n_catalog", ROOT / "scripts" / "i18n_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CATALOG = _catalog_tool()


def test_every_message_shown_has_a_spanish_entry():
    """Given every marked message and error template of the translated parts of the package,
    then each has a non-empty msgstr in locale/es/LC_MESSAGES/jupyterlab_gradcheck.po."""
    entries = CATALOG.read_po()
    translated = {
        (e["msgid"], e.get("msgid_plural")) for e in entries if e["msgid"] and e["msgstr"] and all(e["msgstr"].values())
    }
    found = CATALOG.extract()
    assert len(found) > 250  # errors, CLI, check(), the panel and the HTML export
    missing = [
        f"{msgid!r} ({places[0]})" for (msgid, plural), places in found.items() if (msgid, plural) not in translated
    ]
    assert missing == []


def test_no_error_or_cli_print_writes_its_text_where_the_catalog_cannot_see_it():
    """Given the raise sites of GradcheckError and its subclasses, Message() and the CLI's
    prints, then each message is a literal template (its values as named parameters), passed
    through `_()`, or another error's message passed on."""
    assert CATALOG.unrouted() == []


def test_the_scan_finds_an_fstring_error_and_a_printed_fstring(tmp_path):
    """Given a module that raises SpecError(f"...") and prints an f-string, then the scan
    names both lines; the same messages written as templates pass."""
    module = tmp_path / "bad.py"
    module.write_text(
        'def f(x):\n    print(f"wrote {x}")\n    raise SpecError(f"bad {x}")\n'
        'def g(x):\n    print(_("wrote {x}").format(x=x))\n    raise SpecError("bad {x}", x=x)\n'
    )
    found, unrouted = CATALOG.messages_of(module, {"SpecError"})
    assert [line for line, _what in unrouted] == [3]
    assert [line for line, _what in CATALOG.printed_text(module)] == [2]
    assert sorted((line, msgid) for msgid, _plural, line in found) == [(5, "wrote {x}"), (6, "bad {x}")]


def test_the_expression_language_is_translated_not_excluded():
    """Given core/expr, whose refusals are the messages students meet most (an unknown name, a
    forbidden construct, a bad shape), then it is not among the exclusions, the catalog holds
    its templates, and none of its messages is written where the catalog cannot see it."""
    assert not any(part.startswith("core/expr") for part in CATALOG.NOT_TRANSLATED)
    places = [place for found in CATALOG.extract().values() for place in found]
    assert sum("core/expr/" in place for place in places) > 100
    errors = CATALOG.error_classes(CATALOG.package_files(include_excluded=True))
    expr_files = sorted((CATALOG.PACKAGE / "core" / "expr").glob("*.py"))
    assert [line for path in expr_files for line in CATALOG.messages_of(path, errors)[1]] == []


def test_every_translation_keeps_the_placeholders_of_its_english():
    """Given each translated entry, then it names exactly the parameters its English names
    (a renamed or lost placeholder would raise or drop a value when shown)."""

    def fields(text):
        return sorted({name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None})

    wrong = []
    for entry in CATALOG.read_po():
        if not entry["msgid"]:
            continue
        sources = [entry["msgid"]] + ([entry["msgid_plural"]] if entry.get("msgid_plural") else [])
        for translated in entry["msgstr"].values():
            if translated and fields(translated) != fields(sources[-1]):
                wrong.append(entry["msgid"])
    assert wrong == []


def test_the_committed_mo_is_the_compiled_po():
    """Given the committed .po and .mo, then the .mo is byte for byte the compiled .po
    (python scripts/i18n_catalog.py rebuilds it)."""
    assert CATALOG.MO.read_bytes() == CATALOG.compile_mo(CATALOG.read_po())


def test_a_changed_po_makes_the_committed_mo_stale(tmp_path):
    """Given the .po with one Spanish entry changed, then its compiled .mo differs from the
    committed one, so the check above fails until the .mo is rebuilt."""
    entries = CATALOG.read_po()
    entry = next(e for e in entries if e["msgid"] == "Failure kept")
    entry["msgstr"] = {0: "Fallo guardado"}
    assert CATALOG.compile_mo(entries) != CATALOG.MO.read_bytes()


def test_the_catalog_ships_in_the_wheel(tmp_path):
    """Given the package built as a wheel (without the front-end build), then the compiled
    Spanish catalog is inside it at the path gettext reads."""
    pytest.importorskip("hatchling")
    if not (ROOT / "labextension" / "static" / "style.js").is_file():
        pytest.skip("labextension/ is not built here; scripts/check-wheel.sh checks the full wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next(tmp_path.glob("jupyterlab_gradcheck-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "jupyterlab_gradcheck/locale/es/LC_MESSAGES/jupyterlab_gradcheck.mo" in names


def test_the_check_covers_the_front_end_strings(tmp_path, monkeypatch):
    """Given the front end's sources, then every trans.__() string has its es_ES entry; and
    given a source with a new string and no entry, then `--check` names it and fails."""
    assert len(CATALOG.front_end_strings()) > 150
    assert CATALOG.front_end_problems() == []
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "panel.ts").write_text(
        "// trans.__('a comment is not shown')\nconst label = trans.__('A label nobody translated');\n"
    )
    monkeypatch.setattr(CATALOG, "FRONT_END_SOURCES", sources)
    assert CATALOG.front_end_problems() == ["no Spanish for 'A label nobody translated' (src/panel.ts)"]
    assert CATALOG.main(["--check"]) == 1


def test_a_widget_label_written_in_place_is_named(tmp_path):
    """Given a widget built with an English placeholder in place and another through `_()`,
    then the scan names only the first line; a field name (`rtol`) is not words."""
    module = tmp_path / "panel.py"
    module.write_text(
        'a = Text(description="rtol", placeholder="the dtype default")\n'
        'b = Text(description=_("function"), placeholder=_("the dtype default"))\n'
    )
    assert CATALOG.widget_text(module) == [(1, "placeholder='the dtype default'")]
