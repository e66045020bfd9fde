"""The import graph of the ``morl`` package has no cycle.

Every module under ``morl/`` is parsed (not imported) and each ``import``/``from ... import``
statement, at module level or inside a function, becomes an edge to the ``morl`` module it names:
relative imports are resolved, ``from morl.x import y`` points to ``morl.x.y`` when that is a
module and to ``morl.x`` otherwise, and importing ``morl.a.b`` from outside the package ``morl.a``
also points to ``morl.a``, whose ``__init__`` runs first. A function-level import that hides a
cycle is still a cycle here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "morl"


def module_files(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package (``__init__`` files named
    by their package)."""
    root = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ``morl`` modules that module ``name`` (file ``path``) imports anywhere in its body."""
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    targets: set[str] = set()

    def add(target: str) -> None:
        # Importing morl.a.b runs morl.a's __init__ first, unless the importer is itself inside morl.a
        # (then that package is already being imported).
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in modules:
                continue
            if prefix != target and (name == prefix or name.startswith(prefix + ".")):
                continue
            targets.add(prefix)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != "morl" and not base.startswith("morl."):
                continue
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            for sub in submodules:
                add(sub)
            if len(submodules) < len(node.names):  # some names are attributes of `base` itself
                add(base)
    targets.discard(name)
    return targets


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    modules = module_files(package_dir)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as its modules in import order (the first repeated at the end), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt, BLACK) == GREY:
                return stack[stack.index(nxt) :] + [nxt]
            if colour.get(nxt) == WHITE:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(graph):
        if colour[node] == WHITE:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "morl"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from morl import b\n",  # function level; `from morl import <module>`
        "b.py": "from .sub import c\n",  # relative, to a submodule
        "sub/__init__.py": "from morl.sub.c import X\n",
        "sub/c.py": "from ..d import Y\nimport morl.e\n",  # two levels up; plain import
        "d.py": "from morl import __version__\n",  # an attribute of the package
        "e.py": "from morl.sub.c import X\n",  # from outside `sub`: its __init__ runs too
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    graph = import_graph(pkg)
    assert graph == {
        "morl": set(),
        "morl.a": {"morl.b"},
        "morl.b": {"morl.sub", "morl.sub.c"},
        "morl.sub": {"morl.sub.c"},
        "morl.sub.c": {"morl.d", "morl.e"},
        "morl.d": {"morl"},
        "morl.e": {"morl.sub", "morl.sub.c"},
    }
    assert find_cycle(graph) == ["morl.sub", "morl.sub.c", "morl.e", "morl.sub"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None


def test_morl_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_private_name_crosses_modules():
    """What two modules share is public: no module imports another's ``_name``."""
    crossing = []
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("morl")):
                crossing += [f"{name}: {node.module}.{a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]  # fmt: skip
    assert not crossing, crossing


def test_every_module_says_what_it_holds():
    """Each module opens with a docstring whose first line says what it holds."""
    bare = [name for name, path in module_files().items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not bare, bare


def test_evaluation_imports_nothing_of_training():
    """Evaluating a checkpoint needs the normalisation rules and the checkpoint reader, never the
    training loop: neither the evaluator nor the rollouts reach morl.trainer, directly or through
    another module (the registry imports it only inside ``families.train``)."""
    graph = import_graph()
    for start in ("morl.evaluate", "morl.rollout", "morl.checkpoints"):
        seen, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += sorted(graph.get(name, ()))
        assert "morl.trainer" not in seen, f"{start} reaches morl.trainer"
