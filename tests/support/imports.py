"""The import graph of a Python package read from its source with `ast`, never by importing it.

Every import counts, including those inside functions: a function-level import only hides a
cycle until the function runs. The root package's entry-point hooks count too; they close a
cycle only when a module inside the package imports the root, which is the mistake to catch. What the architecture tests ask of the graph (no cycles, rooms
that import one way, no private name across modules) is answered here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Module:
    """One module of the package: its dotted name, file, and what it imports."""

    name: str
    path: Path
    is_package: bool
    #: dotted module names this module imports (only those inside the package), with the line
    imports: dict[str, int] = field(default_factory=dict)
    #: (module, name, line) for each `from module import _name` that crosses modules
    private_names: list[tuple[str, str, int]] = field(default_factory=list)
    #: top-level names bound by `import`s of outside packages (tornado, ipywidgets, ...)
    outside: set[str] = field(default_factory=set)
    #: the imports that run when the module is imported (not those inside a function): package modules
    loads: set[str] = field(default_factory=set)
    #: ... and outside packages
    loads_outside: set[str] = field(default_factory=set)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_private(name: str) -> bool:
    """A leading underscore, except dunders and gettext's `_` (core/i18n.py: translate a message)."""
    return name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))


def read_package(root: Path) -> dict[str, Module]:
    """Every module under the package folder `root`, with its imports resolved."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(root, path)
        modules[name] = Module(name, path, path.name == "__init__.py")
    top = root.name
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        _read_loads(module, modules, tree, package, top)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == top:
                        _add(module, modules, alias.name, node.lineno)
                    else:
                        module.outside.add(alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node, package)
                if target.split(".")[0] != top:
                    module.outside.add(target.split(".")[0])
                    continue
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    if submodule in modules:
                        _add(module, modules, submodule, node.lineno)
                        continue
                    _add(module, modules, target, node.lineno)
                    if _is_private(alias.name) and target != module.name:
                        module.private_names.append((target, alias.name, node.lineno))
    return modules


def _at_import_time(tree: ast.AST):
    """The nodes that run when the module is imported: everything outside function bodies."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _read_loads(module: Module, modules: dict[str, Module], tree: ast.AST, package: str, top: str) -> None:
    for node in _at_import_time(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    module.loads.add(alias.name)
                else:
                    module.loads_outside.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, package)
            if target.split(".")[0] != top:
                module.loads_outside.add(target.split(".")[0])
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                module.loads.add(submodule if submodule in modules else target)


def loaded_by(modules: dict[str, Module], start: str) -> set[str]:
    """Every package module that importing `start` loads: the imports that run at import time, followed
    through each module they load (importing `a.b.c` loads `a` and `a.b` first)."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        name = stack.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        parts = name.split(".")
        stack.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        stack.extend(modules[name].loads)
    return seen


def room_imports_against_direction(modules: dict[str, Module], package: str, rooms: tuple, leaving=()) -> list[str]:
    """`importer imports target` for each import inside `package` that runs against `rooms`' order.

    `rooms` names the sub-packages of `package` in order, "" standing for the modules at its top: a
    module may import from its own room and the rooms after it. `leaving` lists modules exempt as
    targets (on their way out)."""

    def room(name: str) -> str | None:
        if not name.startswith(package + "."):
            return None
        first = name[len(package) + 1 :].split(".")[0]
        return first if first in rooms else ""

    wrong = []
    for module in modules.values():
        mine = room(module.name)
        if mine is None:
            continue
        for target in module.imports:
            theirs = room(target)
            if theirs is not None and target not in leaving and rooms.index(theirs) < rooms.index(mine):
                wrong.append(f"{module.name} imports {target}")
    return sorted(wrong)


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _add(module: Module, modules: dict[str, Module], target: str, line: int) -> None:
    if target in modules and target != module.name:
        module.imports.setdefault(target, line)


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """The import cycles, each as the modules of one strongly connected component, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        # iterative Tarjan: (node, iterator over its imports)
        work = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(modules[child].imports))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def private_imports(modules: dict[str, Module]) -> list[str]:
    """`importer:line imports _name from module` for each private name that crosses modules."""
    return [
        f"{m.name}:{line} imports {name} from {target}"
        for m in modules.values()
        for target, name, line in m.private_names
    ]


def private_uses_in_tests(path: Path, top: str) -> list[str]:
    """Private names of the package that a test file reaches: `from pkg.x import _y`, or
    `x._y` where `x` was imported from the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package_aliases: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == top:
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{path.name}:{node.lineno} imports {alias.name} from {node.module}")
                package_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    package_aliases.add((alias.asname or alias.name).split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in package_aliases
        ):
            found.append(f"{path.name}:{node.lineno} reaches {node.value.id}.{node.attr}")
    return found


def imports_of_test_modules(path: Path) -> list[str]:
    """The test modules (`test_*`) that a test file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [f"{path.name} imports {name}" for name in names if name.split(".")[-1].startswith("test_")]
