"""The package's layout: the inference core, ``io`` and ``training`` as three rooms, imports one way.

Every ``import`` statement of every module is read from the source (module level and inside
functions alike), so a lazy import that breaks the direction is caught as well as a top-level one.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import nnue_infer

PACKAGE = pathlib.Path(nnue_infer.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> set[str]:
    """Absolute names of the ``nnue_infer`` modules (or packages) ``path`` imports, anywhere in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nnue_infer")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith("nnue_infer"):
                continue
            found.add(module)
            for alias in node.names:  # ``from . import pgn``: a submodule, when one exists
                candidate = f"{module}.{alias.name}"
                if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists() or \
                        (PACKAGE.parent / candidate.replace(".", "/")).is_dir():
                    found.add(candidate)
    return found - {name}


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _room(module: str) -> str:
    parts = module.split(".")
    if module == "nnue_infer.__main__":
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in ("io", "training", "inspection", "cli") else "core"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) == "core"))
def test_core_imports_neither_io_training_nor_cli(module):
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) != "core")
    assert not wrong, f"{module} (inference core) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) in ("io", "training", "inspection")))
def test_io_training_and_inspection_never_import_the_cli(module):
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) == "cli")
    assert not wrong, f"{module} imports the command line {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) in ("io", "training")))
def test_io_and_training_never_import_the_network_tools(module):
    """``inspection`` (the network tools) reads files with ``io`` and compares float networks with ``training``."""
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) == "inspection")
    assert not wrong, f"{module} imports the network tools {wrong}"


def test_no_import_circle_between_modules():
    """No two modules reach each other through imports (module-level or lazy); packages' ``__init__``
    re-exports are left out (importing ``nnue_infer.kernels.x`` runs ``kernels/__init__`` by rule)."""
    graph = {m: {i for i in _imports(p) if i in MODULES and not MODULES[i].name == "__init__.py"}
             for m, p in MODULES.items() if p.name != "__init__.py"}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                circle = stack[stack.index(n):] + [n]
                pytest.fail("import circle: " + " -> ".join(circle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_at_most_sixteen_core_modules_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 16, top
