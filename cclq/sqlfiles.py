"""Finding and parsing the project's SQL files (``sql/views`` and ``sql/metrics``).

``sql/`` sits at the top of the repository. A wheel carries it as ``cclq/sql``
(hatchling ``force-include``); an editable install reads it from the checkout.
``sql_root`` hides the difference, and ``tests/test_packaging.py`` checks that a
built wheel finds every file.

A view module is one ``.sql`` file; its name is its path under ``sql/views``
without the suffix. Its header may declare ``-- requires: a, b``; modules are
loaded after the modules they require.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_REQUIRES = re.compile(r"^--\s*requires:\s*(.*)$", re.MULTILINE)


def sql_root() -> Path:
    packaged = Path(__file__).parent / "sql"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).parent.parent / "sql"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("cclq's sql/ folder is missing from this installation")


@dataclass(frozen=True)
class ViewModule:
    name: str
    path: Path
    requires: tuple[str, ...]
    sql: str


def _parse_module(root: Path, path: Path) -> ViewModule:
    text = path.read_text()
    requires: list[str] = []
    for m in _REQUIRES.finditer(text):
        requires.extend(r.strip() for r in m.group(1).split(",") if r.strip())
    name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
    return ViewModule(name, path, tuple(requires), text)


_DEFINES = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(?:VIEW|MACRO|TABLE)\s+(\w+)", re.IGNORECASE)


def defined_names(module: ViewModule) -> set[str]:
    return {m.lower() for m in _DEFINES.findall(module.sql)}


_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)


def strip_comments(sql: str) -> str:
    """``sql`` without its comments (``--`` to the end of the line, ``/* */``; not
    inside string literals or quoted names), trailing blanks and empty lines: the
    code that decides a result, which ``sql/metrics/CHECKSUMS`` freezes."""
    code = _TOKENS.sub(lambda m: m.group(0) if m.group(0)[0] in "'\"" else "", sql)
    return "\n".join(line.rstrip() for line in code.splitlines() if line.strip()) + "\n"


def _words(sql: str) -> set[str]:
    """Identifiers a piece of SQL mentions, comments and string literals left out."""
    code = re.sub(r"--[^\n]*", " ", sql)
    code = re.sub(r"'(?:[^']|'')*'", " ", code)
    return {w.lower() for w in re.findall(r"\w+", code)}


def modules_for(sql: str) -> tuple[ViewModule, ...]:
    """The modules a query needs: those defining a name it mentions, and what they
    require, in load order. Creating only these keeps start-up short (DuckDB binds a
    view's whole stack, down to the Parquet files, when the view is created)."""
    words = _words(sql)
    modules = view_modules()
    by_name = {m.name: m for m in modules}
    wanted: set[str] = set()
    todo = [m.name for m in modules if defined_names(m) & words]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].requires)
    # a module may use another's objects without declaring it: follow the SQL too
    changed = True
    while changed:
        changed = False
        used = set().union(*(_words(by_name[n].sql) for n in wanted))
        for m in modules:
            if m.name not in wanted and defined_names(m) & used:
                wanted.add(m.name)
                changed = True
    return tuple(m for m in modules if m.name in wanted)


@lru_cache(maxsize=1)
def view_modules() -> tuple[ViewModule, ...]:
    """Every view module, each after the modules it requires."""
    root = sql_root() / "views"
    modules = {m.name: m for m in (_parse_module(root, p) for p in sorted(root.rglob("*.sql")))}
    ordered: list[ViewModule] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ValueError(f"sql/views: circular requires: {' -> '.join(chain + (name,))}")
        if name not in modules:
            raise ValueError(f"sql/views: {chain[-1]} requires unknown module {name!r}")
        state[name] = "visiting"
        for dep in modules[name].requires:
            visit(dep, chain + (name,))
        state[name] = "done"
        ordered.append(modules[name])

    for name in sorted(modules):
        visit(name, ())
    return tuple(ordered)
