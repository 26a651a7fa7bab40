"""Every file path and module the documentation names exists.

docs/*.md, README.md and the package's docstrings name files (`core/check/engine.py`,
`src/verifyReport.ts`, `scripts/ui-tests.sh`) and modules (`core.check.record.spec.parse_spec`). A
file moved or renamed leaves such a name behind, and a reader then looks for what is not there.
A file path is found when some file of the project ends with it (a bare name, `diagonal.py`, when
some file has that name); a dotted module path when its longest prefix that is a module defines
the name that follows it.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jupyterlab_gradcheck"
#: Folders that hold no file a document names: built output, installed packages, caches.
SKIPPED = {".git", "node_modules", ".venv", "lib", "labextension", "build", "dist", "__pycache__", ".yarn", ".stamps"}
#: Files a document names that a user makes, not the project (with why each is named).
NOT_OURS = {
    "nbgrader_config.py": "the course's nbgrader configuration, which `configure(c)` fills",
    "work/lab1.ipynb": "a student's notebook in the examples of the REST API and the server's paths",
    "source/ps1/ps1.ipynb": "an assignment of nbgrader's layout",
    "GRADCHECK_HUB_DIR/witness/witness.jsonl": "the witness's log under the hub's folder",
}
#: What a named file ends with.
EXTENSIONS = "py|ts|tsx|sh|mjs|js|json|md|ipynb|toml|css|html|po|jsonl|yml|yaml|txt"
#: A file path: folders then a name with one of EXTENSIONS, or a bare `name.py` / `name.ts`.
FILE_PATH = re.compile(
    rf"(?<![\w/.\-{{}}<>*$])((?:[A-Za-z0-9_.\-]+/)+[A-Za-z0-9_\-]+\.(?:{EXTENSIONS})|[A-Za-z0-9_]+\.(?:py|ts|tsx))(?![\w/>*}}])"
)
#: A dotted module path of the package: `core.x.y...` or `jupyterlab_gradcheck.x.y...`.
MODULE_PATH = re.compile(r"(?<![\w./])((?:jupyterlab_gradcheck|core)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
#: A dotted name that is a file's (`jupyterlab_gradcheck.po`), not a module's.
FILE_NAME_END = re.compile(r"\.(?:po|mo|json|py|ts|md)$")


@cache
def project_files() -> tuple[str, ...]:
    """Every file of the project as a path relative to its root, outside SKIPPED folders."""
    found = []
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for path in folder.iterdir():
            if path.is_dir():
                if path.name not in SKIPPED:
                    stack.append(path)
            else:
                found.append(path.relative_to(ROOT).as_posix())
    return tuple(found)


def file_exists(name: str) -> bool:
    """Whether a project file is `name` or ends with `/name` (a bare name: has that name); a relative
    link's `../` is dropped."""
    while name.startswith("../"):
        name = name[3:]
    return name in NOT_OURS or any(path == name or path.endswith("/" + name) for path in project_files())


@cache
def defined_names(path: Path) -> frozenset[str]:
    """The names a module binds at its top: definitions, assignments and imports (its submodules too)."""
    if path.is_dir():
        names = {p.stem for p in path.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
        path = path / "__init__.py"
    else:
        names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def module_exists(dotted: str) -> bool:
    """Whether `dotted` (`core.check.engine.run_check`) names a module, or a name its longest module prefix defines."""
    parts = dotted.split(".")
    if parts[0] == "jupyterlab_gradcheck":
        parts = parts[1:]
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:cut])
        module = base if (base / "__init__.py").exists() else base.with_suffix(".py")
        if module.exists():
            rest = parts[cut:]
            return not rest or rest[0] in defined_names(module)
    return not parts  # the package itself


def stale_names(text: str) -> list[str]:
    """The file paths and module paths in `text` that name nothing in the project."""
    stale = [name for name in FILE_PATH.findall(text) if "://" not in name and not file_exists(name.rstrip("."))]
    stale += [
        name
        for name in MODULE_PATH.findall(text)
        if not FILE_NAME_END.search(name) and not module_exists(name.rstrip("."))
    ]
    return stale


def docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the module's, its classes' and its functions' docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                found.append((getattr(node, "lineno", 1), text))
    return found


def test_docs_and_docstrings_name_only_what_exists():
    """Given docs/*.md, README.md and every docstring of the package, when each file path and dotted
    module path they name is looked up, then every one exists."""
    stale = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            stale += [f"{doc.relative_to(ROOT)}:{number} names {name}" for name in stale_names(line)]
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in docstrings(path):
            stale += [f"{path.relative_to(ROOT)}:{line} names {name}" for name in stale_names(text)]
    assert stale == []


def test_a_moved_file_and_a_moved_module_are_reported():
    """Given text that names a file that was moved, a module that was renamed and a name its module
    does not define, beside a file, a module and a name that exist, when it is read, then exactly the
    three stale ones are reported."""
    text = (
        "See core/check/engine.py and core/verify.py; `core.check.record.spec.parse_spec`, "
        "`core.check.spec.parse_spec` and `core.check.engine.run_and_record`; src/verifyReport.ts, outputs.py."
    )
    assert stale_names(text) == [
        "core/verify.py",
        "outputs.py",
        "core.check.spec.parse_spec",
        "core.check.engine.run_and_record",
    ]
