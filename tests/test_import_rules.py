"""The package's layers, read from its own imports (docs/architecture.md draws them).

Every ``import`` in ``cclq/`` is read with ``ast``, also those inside functions and
under ``TYPE_CHECKING``. A module may import its own package and the layers below its
own, never a layer above nor a peer at the same height; no import cycle; no private
name (``_x``) taken from another module. The test prints the counts it checks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cclq"

# Lowest first. A module belongs to the first prefix that matches; each entry of a row
# is a peer of the others in that row (peers may not import each other).
LAYERS: list[tuple[str, ...]] = [
    ("cclq.version", "cclq.errors", "cclq.schema", "cclq.locations", "cclq.proc", "cclq.sqltext", "cclq.runtime"),
    ("cclq.formats",),
    ("cclq.cards",),
    ("cclq.store",),
    ("cclq.ingest", "cclq.record"),
    ("cclq.query",),
    ("cclq.present",),
    ("cclq.api",),
    # HTA's import paths (hta.X -> cclq.hta.X): re-exports of cclq.api only
    ("cclq.hta",),
    # the trace generators, then the benchmarks that use them (imported by tests and `cclq bench`)
    ("cclq.synth",),
    ("cclq.bench",),
    ("cclq.compat",),
    ("cclq.cli",),
    # entry points: `import cclq` (its lazy public names), `python -m cclq`, `python -m cclq.main`
    ("cclq", "cclq.__main__", "cclq.main"),
]
# The base row's modules are separate units: they may import each other (cycles are
# still checked), but nothing above them.
BASE = set(LAYERS[0])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> tuple[int, str]:
    """(layer index, unit): the unit is the layer entry the module falls under."""
    best: tuple[int, str] | None = None
    for i, row in enumerate(LAYERS):
        for prefix in row:
            if module == prefix or (prefix != "cclq" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > len(best[1]):
                    best = (i, prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")
    return best


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, module: str, known: set[str]) -> list[tuple[str, list[str], int]]:
    """(imported cclq module, names taken from it, line) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cclq":
                    found.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "cclq":
                continue
            modules_named = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            names = [a.name for a in node.names if f"{base}.{a.name}" not in known]
            for m in modules_named:
                found.append((m, [], node.lineno))
            if names:
                found.append((base, names, node.lineno))
    return found


def graph() -> tuple[dict[str, set[str]], list[str], list[str]]:
    """(module -> modules it imports, upward or cross-layer imports, private-name imports)."""
    modules = all_modules()
    known = set(modules)
    edges: dict[str, set[str]] = defaultdict(set)
    upward: list[str] = []
    private: list[str] = []
    for module, path in modules.items():
        layer, unit = unit_of(module)
        for target, names, line in imports_of(path, module, known):
            if target not in known:
                raise AssertionError(f"{path}:{line}: imports {target}, which does not exist")
            edges[module].add(target)
            t_layer, t_unit = unit_of(target)
            same_unit = t_unit == unit or (unit in BASE and t_unit in BASE)
            if not same_unit and t_layer >= layer:
                upward.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({unit}) imports "
                    f"{target} ({t_unit}), {'a peer' if t_layer == layer else 'a layer above'}"
                )
            if target != module:
                for name in names:
                    if name.startswith("_") and not name.startswith("__"):
                        private.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} takes {target}.{name}")
    return edges, upward, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(all_modules()):
        if v not in index:
            visit(v)
    return found


def test_imports_point_down_without_cycles_or_private_names():
    edges, upward, private = graph()
    loops = cycles(edges)
    n_imports = sum(len(v) for v in edges.values())
    print(
        f"\n{len(all_modules())} modules, {n_imports} internal imports: {len(loops)} import cycles, "
        f"{len(upward)} upward or cross-layer imports, {len(private)} private cross-module imports"
    )
    assert not upward, "\n".join(upward)
    assert not loops, "\n".join(" <-> ".join(c) for c in loops)
    assert not private, "\n".join(private)


def test_generators_and_benchmarks_are_imported_only_by_themselves_the_cli_and_tests():
    edges, _upward, _private = graph()
    tools = ("cclq.synth", "cclq.bench")
    users = sorted(
        m
        for m, targets in edges.items()
        if any(t.startswith(tools) for t in targets) and not m.startswith((*tools, "cclq.cli"))
    )
    assert not users, f"outside synth/, bench/ and cli/, these import them: {users}"


def test_the_layers_document_lists_every_package():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    for row in LAYERS[1:-1]:
        for prefix in row:
            folder = prefix.removeprefix("cclq.").replace(".", "/") + "/"
            assert folder in page, f"docs/architecture.md does not mention {folder}"


# numpy is no dependency of cclq (pyarrow and duckdb run without it): only the modules
# whose extra brings it may import it or ask Arrow for numpy arrays. The critical path once
# took its path's edge numbers with ``to_numpy``, which every run without the hta extra
# failed on (CI's install), while a developer's environment with pandas passed.
NUMPY_ALLOWED = ("cclq.api", "cclq.hta", "cclq.record")  # the hta extra (pandas); torch


def test_numpy_only_where_an_extra_brings_it():
    found = []
    for module, path in sorted(all_modules().items()):
        if module.startswith(NUMPY_ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "numpy" for n in names):
                found.append(f"{path}:{node.lineno}: imports numpy")
            if isinstance(node, ast.Attribute) and node.attr == "to_numpy":
                found.append(f"{path}:{node.lineno}: asks Arrow for a numpy array (to_numpy)")
    assert not found, "\n".join(found)
