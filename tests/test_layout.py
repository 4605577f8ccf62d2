"""The package's layout: the inference core, ``io``, ``training``, ``search`` and the rest as rooms, imports one way;
the kernels in families; modules of one concept; tests named for what they check.

Every ``import`` statement of every module is read from the source (module level and inside
functions alike), so a lazy import that breaks the direction is caught as well as a top-level one.
"""

from __future__ import annotations

import ast
import pathlib
import re

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
    """``core``, ``io``, ``training``, ``inspection``, ``search`` or ``cli``; the search's kernels
    (``kernels.search``) belong to ``search``: the core evaluates positions, it never searches."""
    parts = module.split(".")
    if module == "nnue_infer.__main__":
        return "cli"
    if parts[1:3] == ["kernels", "search"]:
        return "search"
    return parts[1] if len(parts) > 1 and parts[1] in ("io", "training", "inspection", "search", "cli") else "core"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) == "core"))
def test_core_imports_neither_io_training_search_nor_cli(module):
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) != "core")
    assert not wrong, f"{module} (inference core) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) == "search"))
def test_search_imports_only_the_core_and_its_own_modules(module):
    """``search`` plays with the core's evaluator and kernels; it reads its opening books with python-chess,
    so it needs no ``io``, and ``training`` (self-play) imports it, so it never imports ``training``."""
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) not in ("core", "search"))
    assert not wrong, f"{module} (search) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("nnue_infer.kernels.search")))
def test_search_kernels_import_only_kernels(module):
    wrong = sorted(m for m in _imports(MODULES[module]) if not m.startswith("nnue_infer.kernels"))
    assert not wrong, f"{module} (search kernels) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) in ("io", "inspection")))
def test_io_and_inspection_never_import_the_search(module):
    """``io`` and ``search`` are siblings over the core; ``training`` alone plays games (self-play)."""
    wrong = sorted(m for m in _imports(MODULES[module]) if _room(m) == "search")
    assert not wrong, f"{module} imports the search {wrong}"


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


def test_at_most_eighteen_core_modules_at_the_top():
    """The core stays small enough to read as a list (design.md's first row); a concept that grows
    several modules gets a room of its own.  18: the 16 of the first layout, then the per-layer
    outputs (``layer_outputs``) and Stockfish's static evaluation (``static_evaluation``) taken out
    of ``trace``, one concept each."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 18, top


# -- kernel families ---------------------------------------------------------------------------------------------

#: The chess kernels that write text (SAN, UCI, FEN out): the network's kernels never need them.  The FEN
#: reader (``kernels.chess.fen``) is the chess family's input: the entry kernels read FEN bytes straight into
#: bitboards (one pass, no Python between), so ``kernels.nnue`` may import it.
CHESS_TEXT = ("nnue_infer.kernels.chess.notation",)


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "kernels" else None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _family(m) == "nnue"))
def test_nnue_kernels_import_neither_data_kernels_nor_chess_text(module):
    wrong = sorted(m for m in _imports(MODULES[module])
                   if m.startswith("nnue_infer.kernels.data") or m.startswith(CHESS_TEXT))
    assert not wrong, f"{module} (network kernels) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _family(m) == "chess"))
def test_chess_kernels_never_import_the_network_kernels(module):
    wrong = sorted(m for m in _imports(MODULES[module]) if m.startswith("nnue_infer.kernels.nnue"))
    assert not wrong, f"{module} (chess kernels) imports {wrong}"


def test_the_top_of_kernels_holds_only_how_kernels_compile_and_run():
    top = sorted(p.stem for p in (PACKAGE / "kernels").glob("*.py"))
    assert top == ["__init__", "cache", "refcount", "simd", "threads"], top


# -- one concept per module -------------------------------------------------------------------------------------

#: Lines a module may have before it is likely to hold several concepts.
MODULE_LINES = 800
#: Modules over :data:`MODULE_LINES` that are one concept each, and why.
LONG_MODULES = {
    "nnue_infer.evaluator": "the Evaluator: one class whose entry points share its accumulator stack and its lock",
    "nnue_infer.kernels.simd": "the one place that knows instruction sets: each path's intrinsics and their fallbacks",
}


#: Long modules of several concepts, each to be split along the concepts named (known debt, listed so that
#: no other module grows past the limit unnoticed).
TO_SPLIT: dict[str, str] = {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_long_module_is_one_concept(module):
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MODULE_LINES or module in LONG_MODULES or module in TO_SPLIT, \
        f"{module} has {lines} lines: split it by concept, or say in LONG_MODULES why it is one"


def test_the_long_module_lists_name_only_long_modules():
    short = [m for m in {**LONG_MODULES, **TO_SPLIT}
             if m not in MODULES or len(MODULES[m].read_text(encoding="utf-8").splitlines()) <= MODULE_LINES]
    assert not short, f"no longer over {MODULE_LINES} lines (or gone): {short}"


# -- tests named for what they check ----------------------------------------------------------------------------

TESTS = pathlib.Path(__file__).resolve().parent
#: Words that date a test (an item of an issue, a session, a review round) instead of saying what it checks.
DATED = re.compile(r"(^|_)(item\d+|session\d*\w?|hostile(_pass)?|round\d+|issue\d+|adversarial|reliability)(_|$|\.)")


def _test_files() -> list[pathlib.Path]:
    return sorted(p for p in TESTS.rglob("test_*.py"))


def test_no_test_file_is_named_after_an_issue_or_a_review_round():
    dated = [str(p.relative_to(TESTS)) for p in _test_files() if DATED.search(p.stem)]
    assert not dated, dated


def test_no_test_is_named_after_an_issue_or_a_review_round():
    dated = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.lower().startswith("test") \
                    and DATED.search(node.name.lower()):
                dated.append(f"{path.relative_to(TESTS)}::{node.name}")
    assert not dated, dated


def test_tests_mirror_the_package_areas():
    """Test files live in ``tests/<area>/`` (each a package, so two areas may hold files of one name);
    only the checks of the whole tree (layout, the manual's examples) stay at the top."""
    areas = {"core", "features", "formats", "kernels", "io", "training", "inspection", "cli", "search", "oracles"}
    top = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert top == ["test_layout.py", "test_readme.py"], top
    stray = sorted(str(p.relative_to(TESTS)) for p in _test_files()
                   if p.parent != TESTS and p.relative_to(TESTS).parts[0] not in areas)
    assert not stray, stray
    missing = sorted(str(d.relative_to(TESTS)) for d in TESTS.iterdir()
                     if d.is_dir() and d.name in areas and not (d / "__init__.py").exists())
    assert not missing, f"areas without __init__.py: {missing}"
