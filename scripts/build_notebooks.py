"""Build the gradient-check notebook, in English and in Spanish, from one structure.

Both editions come from the cell list below, so they cannot drift apart: each cell is written
once per language, in the same place. The code is the same in both editions except for
comments, printed words and the notebook's own file name.

    python scripts/build_notebooks.py            # write, execute with nbclient, export the report
    python scripts/build_notebooks.py --no-execute   # write the sources only (no outputs)
    python scripts/build_notebooks.py --edition es   # only the Spanish edition

Executing runs each notebook on a copy in a temporary folder (so no ledger is left behind
from a half-finished run), then writes the executed notebook into examples/. The English
and the Spanish editions each ship with the ledger they produced beside them (bound to it in
`metadata.gradcheck`), so both verify on a fresh clone; the English ledger's HTML export (in
English and in Spanish) and a headless-Chromium screenshot of it go to docs/. The Spanish
edition sets its language to Spanish, so its messages and tables are Spanish.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = {
    "en": ROOT / "examples" / "gradient-check-notebook.ipynb",
    "es": ROOT / "examples" / "es" / "cuaderno-comprobacion-gradientes.ipynb",
}
REPORT_HTML = ROOT / "docs" / "example-report.html"
#: The same export in Spanish (`jupyter gradcheck export --language es`).
REPORT_HTML_ES = ROOT / "docs" / "example-report.es.html"
REPORT_PNG = ROOT / "docs" / "example-report.png"
#: Seconds one cell may run under nbclient (the slowest, verify --replay, takes a few).
CELL_TIMEOUT = 120
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)

#: The checks the notebook fails on purpose, each with the diagnosis the engine must give it.
DELIBERATE_FAILURES = {
    "square_float32_step_1e-7": "precision_limited",  # a float32 step of 1e-7 vanishes in rounding
    "square_wrong_derivative": "probable_bug",  # the 2 of 2x forgotten
    "relu_at_0": "kink",  # relu is not differentiable at 0
    "sin_step_1e-3": "precision_limited",  # a wide step under the default tolerance, before the change
    "two_layer_forgot_tanh_derivative": "probable_bug",  # W1's gradient without the factor 1 - tanh**2
}
#: The check whose tolerance is changed, with a written justification, after its failure.
TOLERANCE_CHANGED = "sin_step_1e-3"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebook_section_1  # noqa: E402,F401  (each import appends its cells, in order)
import notebook_section_models  # noqa: E402,F401
import notebook_sections_2_3  # noqa: E402,F401
import notebook_sections_4_6  # noqa: E402,F401
from notebook_cells import CELLS  # noqa: E402


# --------------------------------------------------------------------------------------------
# Building, executing, exporting
# --------------------------------------------------------------------------------------------
def formatted(source: str) -> str:
    """A code cell's source as the project's ruff settings write it (imports sorted, then formatted),
    so that the shipped notebooks pass `make lint` as the rest of the code does."""
    for command in (("check", "--fix", "--select", "I", "--quiet"), ("format", "--quiet")):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", "cell.py", "-"],
            input=source,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if result.returncode != 0:
            raise SystemExit(f"ruff {command[0]} refused a cell: {result.stderr.strip() or result.stdout.strip()}")
        source = result.stdout
    return source.rstrip("\n")


def build(lang: str) -> nbformat.NotebookNode:
    """The notebook of one edition, without outputs."""
    cells = []
    for cell_id, (kind, en, es) in CELLS:
        source = en if lang == "en" else es
        if kind == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(source, id=cell_id))
        else:
            cells.append(nbformat.v4.new_code_cell(formatted(source), id=cell_id))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata.update(
        {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        }
    )
    return notebook


def sources_of(notebook) -> list[tuple[str, str, str]]:
    """(id, type, source) of every cell: what must match between the generator and a committed file."""
    return [(c.get("id"), c.cell_type, c.source) for c in notebook.cells]


def execute(notebook, workdir: Path, name: str):
    """Execute `notebook` as `workdir/name` with nbclient; return (executed notebook, its path)."""
    from nbclient import NotebookClient

    path = workdir / name
    nbformat.write(notebook, path)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return notebook, path


def leaked_paths(notebook, forbidden: tuple[str, ...]) -> list[str]:
    """Outputs that mention a machine path (they must not be committed)."""
    found = []
    for c in notebook.cells:
        text = nbformat.writes(nbformat.v4.new_notebook(cells=[c]))
        found += [f"{c.get('id')}: {word}" for word in forbidden if word in text]
    return found


def screenshot(html: Path, png: Path) -> None:
    """A PNG of the report, rendered by headless Chromium."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--screenshot={png}",
                "--window-size=1200,1600",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-execute", action="store_true", help="write the sources only, without outputs")
    parser.add_argument(
        "--edition",
        choices=sorted(EDITIONS),
        action="append",
        help="build only this edition (repeatable; default: both)",
    )
    args = parser.parse_args(argv)
    from jupyterlab_gradcheck.core.ledger.binding import METADATA_KEY, binding_for
    from jupyterlab_gradcheck.core.ledger.store import Ledger

    for lang, target in EDITIONS.items():
        if args.edition and lang not in args.edition:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = build(lang)
        if args.no_execute:
            nbformat.write(notebook, target)
            print(f"wrote {target.relative_to(ROOT)} (not executed)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            notebook, path = execute(notebook, workdir, target.name)
            leaks = leaked_paths(notebook, (tmp, str(ROOT), os.path.expanduser("~") + "/"))
            if leaks:
                raise SystemExit(f"machine paths in the outputs: {leaks}")
            ledger = Ledger.for_notebook(path)
            notebook.metadata[METADATA_KEY] = binding_for(ledger, path)
            shutil.copyfile(ledger.path, target.parent / ledger.path.name)
            nbformat.write(notebook, target)
            if lang == "en":
                _export_report(target)
        print(f"wrote {target.relative_to(ROOT)} (executed)")
    return 0


def _export_report(notebook: Path) -> None:
    """docs/example-report.html from the committed notebook's ledger, and its screenshot;
    docs/example-report.es.html, the same export in Spanish."""
    for language, report in (("en", REPORT_HTML), ("es", REPORT_HTML_ES)):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jupyter",
                "gradcheck",
                "export",
                notebook.name,
                "--format",
                "html",
                "--language",
                language,
                "-o",
                str(report),
            ],
            cwd=notebook.parent,
            check=True,
        )
    screenshot(REPORT_HTML, REPORT_PNG)
    print(
        f"wrote {REPORT_HTML.relative_to(ROOT)}, {REPORT_HTML_ES.relative_to(ROOT)} and {REPORT_PNG.relative_to(ROOT)}"
    )


if __name__ == "__main__":
    sys.exit(main())
