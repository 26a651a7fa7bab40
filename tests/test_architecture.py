"""The layout stays as it was made: rooms that import one way (the core's, and core/check's own
sub-rooms), no cycles, no private names across modules, short modules, a torch-free record room that
is all the server process loads of core/check, and tests that never import each other.

The graph is read from the source with `ast` (tests/support/imports.py), so an import inside a
function counts as much as one at the top of a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.imports import (
    cycles,
    imports_of_test_modules,
    loaded_by,
    private_imports,
    private_uses_in_tests,
    read_package,
    room_imports_against_direction,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jupyterlab_gradcheck"
TESTS = ROOT / "tests"
ROOMS = ("expr", "values", "check", "ledger", "report", "run")  # each may import only those before it
#: The witness's modules that hold no web framework: its signed log, the client that reports heads, and
#: the check of a ledger against what the witness saw. The ledger reports its heads and verify reads
#: the witness through them; the witness's service and relay (tornado) stay outside the core.
WITNESS_CORE = {f"jupyterlab_gradcheck.witness.{name}" for name in ("log", "client", "verify")}
#: The torch-free modules of core/values: the server process may load them.
VALUES_TORCH_FREE = ("jupyterlab_gradcheck.core.values.form", "jupyterlab_gradcheck.core.values.blobs")
SURFACES = ("cli", "server", "widget", "api")
FRAMEWORKS = {"tornado", "jupyter_server", "jupyter_client", "ipywidgets", "IPython", "ipykernel", "nbclient"}
#: The grain of the package: a module holds a whole concept, so there are few, and few are short.
MAX_FILES = 110
MIN_MEDIAN_LINES = 180
CHECK = "jupyterlab_gradcheck.core.check"
#: core/check's rooms in import order: the entry points at its top ("": engine, numerical_verdict,
#: environment, diagnosis), then autograd/, fd/, compare/, record/; each imports only its own and later ones.
CHECK_ROOMS = ("", "autograd", "fd", "compare", "record")


@pytest.fixture(scope="module")
def package():
    return read_package(PACKAGE)


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "jupyterlab_gradcheck"


def _room(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "core" and parts[2] in ROOMS else None


# ------------------------------------------------------------------- the package itself
def test_the_package_has_no_import_cycle(package):
    """Given every module of the package, imports inside functions included,
    then no module can reach itself through its imports."""
    assert cycles(package) == []


def test_no_private_name_crosses_modules(package):
    """Given every `from x import _name` in the package, then none names another module's
    private name: a name another module needs is part of a contract and public."""
    assert private_imports(package) == []


def test_the_rooms_of_the_core_import_one_way(package):
    """Given the core's rooms expr <- check <- ledger <- report,
    then a room imports only from the rooms before it and the core's root (errors, jsonio),
    the root imports no room, and the core imports no surface and no web or widget framework."""
    wrong = []
    for module in package.values():
        if not module.name.startswith("jupyterlab_gradcheck.core"):
            continue
        room = _room(module.name)
        allowed = ROOMS[: ROOMS.index(room) + 1] if room else ()
        for target in module.imports:
            if target in WITNESS_CORE:
                continue
            if not target.startswith("jupyterlab_gradcheck.core"):
                wrong.append(f"{module.name} imports the surface {target}")
            elif _room(target) is not None and _room(target) not in allowed:
                wrong.append(f"{module.name} imports {target}")
        for outside in module.outside & FRAMEWORKS:
            wrong.append(f"{module.name} imports {outside}")
    assert wrong == []


def test_the_witness_modules_the_core_reads_hold_no_framework(package):
    """Given the witness's log, client and verify modules (which the ledger and verify import),
    then they import only the core and each other, and no web or widget framework."""
    wrong = []
    for name in sorted(WITNESS_CORE):
        module = package[name]
        for target in module.imports:
            if not (target.startswith("jupyterlab_gradcheck.core") or target in WITNESS_CORE):
                wrong.append(f"{name} imports {target}")
        wrong += [f"{name} imports {outside}" for outside in sorted(module.outside & FRAMEWORKS)]
    assert wrong == []


def test_the_torch_free_values_import_no_torch(package):
    """Given the value form and the blob store of core/values, then neither imports torch, not even
    inside a function: the server process reads stored values and serves blobs with them."""
    assert [name for name in VALUES_TORCH_FREE if "torch" in package[name].outside] == []


def test_the_rooms_of_check_import_one_way(package):
    """Given core/check's rooms, the entry points -> autograd/ -> fd/ -> compare/ -> record/,
    then no module imports from a room before its own (imports inside functions count)."""
    assert room_imports_against_direction(package, CHECK, CHECK_ROOMS) == []


def test_the_record_room_imports_no_torch(package):
    """Given every module of core/check/record/ (the check's declaration and its fields),
    then none imports torch, not even inside a function: the server process loads this room."""
    record = [m.name for m in package.values() if m.name.startswith(f"{CHECK}.record") and "torch" in m.outside]
    assert record == []


def test_the_server_process_loads_only_the_record_room_of_check(package):
    """Given every module of the server extension, when it is imported (its imports at import time,
    followed through every module they load), then of core/check it loads only record/ (and the
    packages above it), and torch is never loaded: the checks run in worker processes."""
    wrong = {}
    for start in (m.name for m in package.values() if m.name.startswith("jupyterlab_gradcheck.server")):
        loaded = loaded_by(package, start)
        numeric = sorted(
            name
            for name in loaded
            if (name.startswith(f"{CHECK}.") and not name.startswith(f"{CHECK}.record"))
            or (name.startswith("jupyterlab_gradcheck.core.values.") and name not in VALUES_TORCH_FREE)
        )
        torch = sorted(name for name in loaded if "torch" in package[name].loads_outside)
        if numeric or torch:
            wrong[start] = numeric + torch
    assert wrong == {}


def test_surfaces_import_the_core_never_each_other(package):
    """Given the CLI, the server extension, the widget and the Python API,
    then none imports another surface (the kernel-side code is shared by widget and api)."""
    wrong = []
    for module in package.values():
        surface = module.name.split(".")[1] if "." in module.name else None
        if surface not in SURFACES:
            continue
        for target in module.imports:
            other = target.split(".")[1] if "." in target else None
            if other in SURFACES and other != surface:
                wrong.append(f"{module.name} imports {target}")
    assert wrong == []


def test_modules_hold_whole_concepts(package):
    """Given every module of the package, then there are at most MAX_FILES of them and the median
    is at least MIN_MEDIAN_LINES long: a concept lives in one module, however long, rather than
    split across short files that are always read together."""
    lengths = sorted(len(m.path.read_text().splitlines()) for m in package.values())
    median = lengths[len(lengths) // 2]
    assert (len(lengths) <= MAX_FILES, median >= MIN_MEDIAN_LINES) == (True, True), (len(lengths), median)


def test_tests_reach_no_private_name_and_import_no_test_module():
    """Given every test file, then none reaches a private name of the package and none imports
    another test module: what several tests share lives in tests/support."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += private_uses_in_tests(path, "jupyterlab_gradcheck") + imports_of_test_modules(path)
    assert found == []


# --------------------------------------------- the checks catch the cycles the core once had
def test_a_cycle_hidden_in_a_method_is_found(tmp_path):
    """Given a ledger module whose method imports verify, which imports the chain check, which
    imports the ledger (the cycle closed only by a function-level import),
    then the cycle is reported with all three modules."""
    root = _write(
        tmp_path,
        {
            "jupyterlab_gradcheck/__init__.py": "",
            "jupyterlab_gradcheck/core/__init__.py": "",
            "jupyterlab_gradcheck/core/ledger.py": "class Ledger:\n    def verify(self):\n"
            "        from .verify import verify_path\n",
            "jupyterlab_gradcheck/core/verify.py": "from .chain import verify_lines\n",
            "jupyterlab_gradcheck/core/chain.py": "from .ledger import _line_sha\n",
        },
    )
    modules = read_package(root)
    assert cycles(modules) == [
        ["jupyterlab_gradcheck.core.chain", "jupyterlab_gradcheck.core.ledger", "jupyterlab_gradcheck.core.verify"]
    ]
    assert private_imports(modules) == [
        "jupyterlab_gradcheck.core.chain:1 imports _line_sha from jupyterlab_gradcheck.core.ledger"
    ]


def test_handlers_that_import_their_route_table_are_a_cycle(tmp_path):
    """Given a route table that imports a handler whose base class reads a setting name from
    the route table inside a property, then the cycle is reported."""
    root = _write(
        tmp_path,
        {
            "jupyterlab_gradcheck/__init__.py": "",
            "jupyterlab_gradcheck/server/__init__.py": "",
            "jupyterlab_gradcheck/server/routes.py": "from .handlers.status import StatusHandler\nSETTING = 's'\n",
            "jupyterlab_gradcheck/server/handlers/__init__.py": "",
            "jupyterlab_gradcheck/server/handlers/status.py": "from .base import Base\nclass StatusHandler(Base): ...\n",
            "jupyterlab_gradcheck/server/handlers/base.py": "class Base:\n    @property\n    def service(self):\n"
            "        from ..routes import SETTING\n",
        },
    )
    assert cycles(read_package(root)) == [
        [
            "jupyterlab_gradcheck.server.handlers.base",
            "jupyterlab_gradcheck.server.handlers.status",
            "jupyterlab_gradcheck.server.routes",
        ]
    ]


def test_a_module_that_imports_the_package_root_closes_a_cycle_through_its_hooks(tmp_path):
    """Given a root whose entry-point hook imports the server extension (Jupyter calls it), and
    a service that imports `__version__` from the root,
    then root -> extension -> service -> root is a cycle; without the service's import the
    hook alone makes none."""
    files = {
        "jupyterlab_gradcheck/__init__.py": "__version__ = '1'\n\ndef _jupyter_server_extension_points():\n"
        "    from .server.extension import App\n",
        "jupyterlab_gradcheck/server/__init__.py": "",
        "jupyterlab_gradcheck/server/extension.py": "from .service import Service\n",
        "jupyterlab_gradcheck/server/service.py": "from .. import __version__\n",
    }
    assert cycles(read_package(_write(tmp_path / "with", files))) == [
        ["jupyterlab_gradcheck", "jupyterlab_gradcheck.server.extension", "jupyterlab_gradcheck.server.service"]
    ]
    files["jupyterlab_gradcheck/server/service.py"] = "VERSION = '1'\n"
    assert cycles(read_package(_write(tmp_path / "without", files))) == []


def test_an_import_against_the_rooms_direction_and_a_module_loaded_at_import_are_found(tmp_path):
    """Given a record module that imports fd/ inside a function, and an fd module that imports record/
    at its top, then only the first is against the direction; a server module that imports the fd
    module at its top loads it (and record/ through it), and one that imports it in a function does not."""
    root = _write(
        tmp_path,
        {
            "jupyterlab_gradcheck/__init__.py": "",
            "jupyterlab_gradcheck/server/__init__.py": "",
            "jupyterlab_gradcheck/server/eager.py": "from ..core.check.fd.steps import STEP\n",
            "jupyterlab_gradcheck/server/lazy.py": "def run():\n    from ..core.check.fd.steps import STEP\n",
            "jupyterlab_gradcheck/core/__init__.py": "",
            "jupyterlab_gradcheck/core/check/__init__.py": "",
            "jupyterlab_gradcheck/core/check/fd/__init__.py": "",
            "jupyterlab_gradcheck/core/check/fd/steps.py": "import torch\nfrom ..record.spec import FIELDS\nSTEP = 1\n",
            "jupyterlab_gradcheck/core/check/record/__init__.py": "",
            "jupyterlab_gradcheck/core/check/record/spec.py": "FIELDS = ()\ndef cost():\n"
            "    from ..fd.steps import STEP\n",
        },
    )
    modules = read_package(root)
    assert room_imports_against_direction(modules, CHECK, CHECK_ROOMS) == [
        "jupyterlab_gradcheck.core.check.record.spec imports jupyterlab_gradcheck.core.check.fd.steps"
    ]
    eager = loaded_by(modules, "jupyterlab_gradcheck.server.eager")
    assert {f"{CHECK}.fd.steps", f"{CHECK}.record.spec"} <= eager
    assert "torch" in modules[f"{CHECK}.fd.steps"].loads_outside
    assert not any(name.startswith(CHECK) for name in loaded_by(modules, "jupyterlab_gradcheck.server.lazy"))


def test_a_test_that_imports_another_or_reaches_a_private_name_is_reported(tmp_path):
    """Given a test file that imports a helper from another test module and reaches a private
    attribute of a package module, then both are reported by file and line."""
    path = tmp_path / "test_story.py"
    path.write_text(
        "from test_verdict import CubeWrongAt\nfrom jupyterlab_gradcheck.core.check import spec\n"
        "from jupyterlab_gradcheck.core.ledger.store import _LockedFd\n\nPATTERN = spec._DEVICE\n"
    )
    assert imports_of_test_modules(path) == ["test_story.py imports test_verdict"]
    assert private_uses_in_tests(path, "jupyterlab_gradcheck") == [
        "test_story.py:3 imports _LockedFd from jupyterlab_gradcheck.core.ledger.store",
        "test_story.py:5 reaches spec._DEVICE",
    ]


def test_the_code_cites_no_numbered_policy():
    """Given every module of the package, then none cites a numbered policy ('policy 5', 'policy N'):
    the numerical rules are one set, named by the version in which they last changed, and their
    history lives in CHANGELOG.md."""
    import re

    cited = re.compile(r"\bpolic(?:y|ies) (?:\d+|N)\b", re.IGNORECASE)
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if cited.search(line)
    ]
    assert found == []
