"""Finding and parsing the project's SQL files (``sql/views`` and ``sql/metrics``).

``sql/`` sits at the top of the repository. A wheel carries it as ``cclq/sql``
(hatchling ``force-include``); an editable install reads it from the checkout.
``sql_root`` hides the difference, and ``tests/test_packaging.py`` checks that a
built wheel finds every file.

A view module is one ``.sql`` file; its name is its path under ``sql/views``
without the suffix. Its header may declare ``-- requires: a, b``; modules are
loaded after the modules they require. ``-- extends: a`` (with ``a`` also
required) makes a module part of ``a`` wherever ``a`` is loaded: a generic module
declares an empty extension point (a view with the columns and ``WHERE false``),
and a domain module that extends it replaces that view with its rows, so the
dependency points from the domain (Horovod, XLA, execution traces) to the generic
module (``collectives``, ``steps``), never back. ``sql/views/metric_bodies`` holds
the shared bodies of metric versions (``<metric>_rows(...)``).

Documentation the loader reads (the format is in sql/README.md):

* a view module's comment block right above ``CREATE ... VIEW <name>`` becomes
  ``COMMENT ON VIEW``, and its ``--   <column>  <phrase>`` lines under a
  ``-- columns:`` line become ``COMMENT ON COLUMN`` (``comment_statements``);
* a metric's header ``-- columns:`` block lists its detail columns the same way
  (``cclq.query.registry``; tests/query/test_sql_contract.py checks them against the result).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from cclq.locations import sql_root

_REQUIRES = re.compile(r"^--\s*requires:\s*(.*)$", re.MULTILINE)
_EXTENDS = re.compile(r"^--\s*extends:\s*(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class ViewModule:
    name: str
    path: Path
    requires: tuple[str, ...]
    sql: str
    extends: tuple[str, ...] = ()  # the modules it is part of wherever they are loaded


def _parse_module(root: Path, path: Path) -> ViewModule:
    text = path.read_text()

    def listed(pattern: re.Pattern[str]) -> tuple[str, ...]:
        return tuple(r.strip() for m in pattern.finditer(text) for r in m.group(1).split(",") if r.strip())

    name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
    return ViewModule(name, path, listed(_REQUIRES), text, listed(_EXTENDS))


_DEFINES = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?(?:VIEW|MACRO|TABLE)\s+(\w+)", re.IGNORECASE)


@cache
def defined_names(module: ViewModule) -> frozenset[str]:
    # cached (as ``_words`` and ``modules_for``): a report asks this some 30,000 times,
    # which cost 1.5 s of regular expressions per report before
    return frozenset(m.lower() for m in _DEFINES.findall(module.sql))


_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)


def strip_comments(sql: str) -> str:
    """``sql`` without its comments (``--`` to the end of the line, ``/* */``; not
    inside string literals or quoted names), trailing blanks and empty lines: the
    code that decides a result, which ``sql/metrics/CHECKSUMS`` freezes."""
    code = _TOKENS.sub(lambda m: m.group(0) if m.group(0)[0] in "'\"" else "", sql)
    return "\n".join(line.rstrip() for line in code.splitlines() if line.strip()) + "\n"


@lru_cache(maxsize=4096)
def _words(sql: str) -> frozenset[str]:
    """Identifiers a piece of SQL mentions, comments and string literals left out."""
    code = re.sub(r"--[^\n]*", " ", sql)
    code = re.sub(r"'(?:[^']|'')*'", " ", code)
    return frozenset(re.findall(r"\w+", code.lower()))  # lowered once, not word by word


def modules_for(sql: str) -> tuple[ViewModule, ...]:
    """The modules a query needs: those defining a name it mentions, and what they
    require, in load order (which metric bodies a metric's SQL reads, for its checksum
    and ``--explain``)."""
    return _modules_for(sql, view_modules())


@lru_cache(maxsize=1024)
def _modules_for(sql: str, modules: tuple[ViewModule, ...]) -> tuple[ViewModule, ...]:
    words = _words(sql)
    by_name = {m.name: m for m in modules}
    extended_by: dict[str, list[str]] = {}
    for m in modules:
        for base in m.extends:
            extended_by.setdefault(base, []).append(m.name)
    wanted: set[str] = set()

    def want(names: list[str]) -> None:
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in wanted:
                wanted.add(name)
                todo.extend(by_name[name].requires)
                todo.extend(extended_by.get(name, ()))  # its extensions come with it

    want([m.name for m in modules if defined_names(m) & words])
    # a module may use another's objects without declaring it: follow the SQL too
    changed = True
    while changed:
        used = set().union(*(_words(by_name[n].sql) for n in wanted))
        before = len(wanted)
        want([m.name for m in modules if m.name not in wanted and defined_names(m) & used])
        changed = len(wanted) > before
    return tuple(m for m in modules if m.name in wanted)


@lru_cache(maxsize=1)
def _definitions() -> dict[str, frozenset[str]]:
    """Each view or macro name -> the words of its definitions (its own statement in every
    module that defines it, extension points included)."""
    out: dict[str, frozenset[str]] = {}
    for module in view_modules():
        found = list(_DEFINES.finditer(module.sql))
        for i, match in enumerate(found):
            end = found[i + 1].start() if i + 1 < len(found) else len(module.sql)
            name = match.group(1).lower()
            out[name] = out.get(name, frozenset()) | _words(module.sql[match.end() : end])
    return out


@lru_cache(maxsize=1024)
def names_reached(sql: str) -> frozenset[str]:
    """The views and macros a query reads, directly or through the definitions of others:
    finer than ``modules_for`` (a whole module), for deciding what several queries share
    (``cclq.query.metrics``). A word that only looks like a name (a column called like a
    view) may add a name; none is ever left out."""
    definitions = _definitions()
    todo = [w for w in _words(sql) if w in definitions]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(w for w in definitions[name] if w in definitions and w not in seen)
    return frozenset(seen)


_MACRO = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+)?MACRO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)
_CALL = re.compile(r"\b(\w+)\(([^()]*)\)")


@lru_cache(maxsize=1024)
def mentions(sql: str, word: str) -> bool:
    """Whether ``word`` (a name in lower case) is in the query or in a definition it
    reaches: a relation the runner defines (``metric_params``) that no view module does."""
    definitions = _definitions()
    return word in _words(sql) or any(word in definitions[n] for n in names_reached(sql) if n in definitions)


@lru_cache(maxsize=1)
def _bodies() -> dict[str, str]:
    """Each view or macro name -> the code of its definitions (comments left out)."""
    out: dict[str, str] = {}
    for module in view_modules():
        found = list(_DEFINES.finditer(module.sql))
        for i, match in enumerate(found):
            end = found[i + 1].start() if i + 1 < len(found) else len(module.sql)
            name = match.group(1).lower()
            out[name] = out.get(name, "") + strip_comments(module.sql[match.start() : end])
    return out


@lru_cache(maxsize=1)
def _macro_parameters() -> dict[str, tuple[str, ...]]:
    """Each macro -> its parameter names, in order."""
    return {
        m.group(1).lower(): tuple(p.split(":=")[0].strip().lower() for p in m.group(2).split(",") if p.strip())
        for module in view_modules()
        for m in _MACRO.finditer(module.sql)
    }


def _calls(code: str) -> list[tuple[str, list[str]]]:
    """The calls in ``code`` whose arguments hold no parentheses: (name, arguments)."""
    return [(name.lower(), [a.strip().lower() for a in args.split(",")]) for name, args in _CALL.findall(code)]


_WRITTEN_CALL = re.compile(r'\b(\w+)\b"?\s*\(')  # any name followed by "(", quoted or spaced too


@lru_cache(maxsize=64)
def _call_sites(queries: tuple[str, ...]) -> dict[str, list[tuple[str, tuple[str, ...] | None]]]:
    """Name -> (the enclosing definition, "" for a query; the call's arguments, None where
    ``_calls`` cannot read them) for every call written in these queries and in the
    definitions they reach (a definition's own ``CREATE MACRO name(...)`` is none)."""
    bodies = _bodies()
    reached = frozenset().union(*(names_reached(q) for q in queries)) if queries else frozenset()
    codes = [("", strip_comments(q)) for q in queries] + [(n, bodies[n]) for n in sorted(reached) if n in bodies]
    sites: dict[str, list[tuple[str, tuple[str, ...] | None]]] = {}
    for owner, code in codes:
        read: dict[str, list[tuple[str, ...]]] = {}
        for name, args in _calls(code):
            read.setdefault(name, []).append(tuple(args))
        written: dict[str, int] = {}
        for name in _WRITTEN_CALL.findall(code):
            written[name.lower()] = written.get(name.lower(), 0) + 1
        for name, count in written.items():
            if name == owner:
                continue
            found = read.get(name, [])
            sites.setdefault(name, []).extend((owner, args) for args in found)
            if count != len(found):
                sites[name].append((owner, None))
    return sites


@lru_cache(maxsize=64)
def literal_arguments(queries: tuple[str, ...]) -> dict[str, frozenset[tuple[int, int]]]:
    """Macro -> the (position, integer) arguments these queries can call it with: the
    integer literals of the calls in them and in the definitions they reach, passed on
    through the macros that hand a parameter on (``collective_volumes_with(2, scope)``
    calls ``collectives_with(rules_version)``: 2). For computing only the versions of a
    versioned macro that a batch reads (``cclq.query.metrics``); a call whose arguments
    hold parentheses is not seen (``calls_read`` says whether there is one)."""
    sites, parameters = _call_sites(queries), _macro_parameters()
    found: dict[str, set[tuple[int, int]]] = {}
    for name, calls in sites.items():
        for _, args in calls:
            found.setdefault(name, set()).update((k, int(a)) for k, a in enumerate(args or ()) if a.isdigit())
    changed = True
    while changed:
        changed = False
        for name, calls in sites.items():
            for outer, args in calls:
                params = parameters.get(outer, ())
                for k, a in enumerate(args or ()):
                    if a in params:
                        j = params.index(a)
                        new = {(k, v) for pos, v in found.get(outer, ()) if pos == j} - found[name]
                        if new:
                            found[name].update(new)
                            changed = True
    return {name: frozenset(args) for name, args in found.items()}


@lru_cache(maxsize=256)
def calls_read(queries: tuple[str, ...], macro: str) -> bool:
    """Whether ``literal_arguments`` reads every call of ``macro`` (a macro of one
    argument) in these queries and the definitions they reach: each written
    ``macro(...)`` with no parentheses in its arguments, its argument an integer literal
    or a parameter that the enclosing macro hands on, itself called only so. Then the
    versions it finds are all a batch can ask for (``cclq.query.metrics``); a call it
    cannot read (``macro((1))``, ``"macro"(1)``, a column) makes this False."""
    sites, parameters = _call_sites(queries), _macro_parameters()

    def read(name: str, position: int, chain: frozenset[str]) -> bool:
        for owner, args in sites.get(name, []):
            if args is None:
                return False
            arg = args[position] if position < len(args) else ""
            params = parameters.get(owner, ())
            if not arg.isdigit() and not (
                arg in params and owner not in chain and read(owner, params.index(arg), chain | {name})
            ):
                return False
        return True

    return read(macro.lower(), 0, frozenset())


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
    for m in ordered:
        for base in m.extends:
            if base not in m.requires:
                raise ValueError(f"sql/views: {m.name} extends {base!r} without requiring it (it must load after it)")
    return tuple(ordered)


# --- rule matchers (``-- matcher:`` lines) ----------------------------------------------

# ``-- matcher: <macro>(text, <column>, ...) FROM <rules>``, a header line of the module
# that creates the view ``<rules>`` (columns ``priority`` and ``pattern``, and the named
# ones). cclq.query.view_catalog creates ``<macro>`` with the module (a stand-in before
# it, the rules' macro right after): a scalar macro with the pattern of each rule as a
# constant (see ``matcher_macro`` there).
_MATCHER = re.compile(r"^--\s*matcher:(.*)$", re.MULTILINE)
_MATCHER_WORDS = re.compile(r"^\s*(\w+)\s*\(\s*text\s*((?:,\s*\w+\s*)*)\)\s+FROM\s+(\w+)\s*$")


@dataclass(frozen=True)
class Matcher:
    """A rules view's matcher: ``macro(text, *columns)`` is the list of the ``priority``
    of every rule of ``rules`` whose ``columns`` equal the arguments and whose ``pattern``
    matches ``text`` (regexp_matches), lowest first. Joining on a pattern column made
    DuckDB compile each regex again for every (text, rule) pair (0.43 s of a board over
    ../shared/traces for 610 kernel names and 30 rules); in the macro each is compiled once."""

    macro: str
    columns: tuple[str, ...]
    rules: str


def module_matchers(module: ViewModule) -> list[Matcher]:
    """The ``-- matcher:`` lines of one view module; a malformed one is an error naming
    the file and line."""
    found: list[Matcher] = []
    for m in _MATCHER.finditer(module.sql):
        words = _MATCHER_WORDS.match(m.group(1))
        if words is None:
            where = f"{module.path}:{module.sql.count(chr(10), 0, m.start()) + 1}"
            raise ValueError(f"{where}: a matcher line is `-- matcher: <macro>(text, <column>, ...) FROM <rules>`")
        columns = tuple(c.strip() for c in words.group(2).split(",") if c.strip())
        found.append(Matcher(words.group(1), columns, words.group(3)))
    return found


# --- what a batch of queries computes once (``-- batch:`` lines) -----------------------

# ``-- batch: shared [always] [from <source> via <stand_in> [as view]] [without <column>, ...]``, in the comment block
# right above the CREATE of a view or of a table macro of one argument (a rules
# version), as its last line; the lines after it in the block, indented (``--   ...``),
# are its note (why), which the view's catalog comment leaves out. ``cclq.query.metrics``
# reads them (``shared_views``): see sql/README.md.
_BATCH = re.compile(r"^--\s*batch:(.*)$")
_BATCH_ANYWHERE = re.compile(r"^--\s*batch:", re.MULTILINE)
_BATCH_WORDS = re.compile(
    r"^\s*shared(?:\s+(always))?(?:\s+from\s+(\w+)\s+via\s+(\w+)(\s+as\s+view)?)?"
    r"(?:\s+without\s+(\w+(?:\s*,\s*\w+)*))?\s*$"
)
_BATCH_CREATE = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(VIEW|MACRO)\s+(\w+)\s*(?:\(([^)]*)\)\s*AS\s+(TABLE)\b)?", re.IGNORECASE
)


@dataclass(frozen=True)
class BatchView:
    """A view or table macro that a batch computes once into a table when two or more of
    its queries read it (``cclq.query.metrics.shared_views``), as its ``-- batch:`` line
    says."""

    name: str
    path: Path  # the view module that declares it
    macro: bool  # a table macro of one argument, a rules version: a table per version
    always: bool = False  # shared even when only one query of the batch reads it
    # when the batch shares ``source`` too, the rows are computed from ``stand_in`` (a
    # view over ``source`` with the same rows), and shared even for one reader
    source: str | None = None
    stand_in: str | None = None
    # columns of the view that no query of the batch reads: its shared table leaves them
    # out (their memory: a kernel's `args` text alone is 124 MB at 1 GB, issue 42), and
    # its shadow has no such column, so a query that names one fails to bind instead of
    # reading something else; tests/query/test_shared_columns.py binds every reader
    without: tuple[str, ...] = ()
    # ``as view``: with the source shared, a view over the source's table (``stand_in``
    # read as it is, its columns the view's less ``without``), not a table of its own:
    # no copy of rows the source's table already holds (kernels in gpu_ops: 0.2 GB at 1 GB)
    as_view: bool = False


def parse_batch_lines(module: ViewModule) -> list[BatchView]:
    """The ``-- batch:`` lines of one view module, each with the CREATE below it; a
    ValueError naming the file and the line for one that is misplaced or malformed."""
    out: list[BatchView] = []
    if not _BATCH_ANYWHERE.search(module.sql):
        return out  # most modules: the line-by-line walk below was 20 ms of every session
    lines = module.sql.splitlines()
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    block_start = 0
    for i, line in enumerate(lines + [""]):
        if line.startswith("--"):
            continue
        block = lines[block_start:i]
        found = [k for k, b in enumerate(block) if _BATCH.match(b)]
        said = [m.group(1) for b in block if (m := _BATCH.match(b))]
        if found:
            where = f"{module.path}:{block_start + found[0] + 1}"
            if len(found) > 1:
                raise ValueError(f"{where}: two `-- batch:` lines for one CREATE")
            note = block[found[0] + 1 :]
            if any(not n.startswith("--  ") for n in note):
                raise ValueError(f"{where}: the `-- batch:` line must end its comment block (then only `--   ` notes)")
            create = _BATCH_CREATE.match(module.sql, offsets[i]) if i < len(lines) else None
            if create is None:
                raise ValueError(f"{where}: a `-- batch:` line must be right above a CREATE VIEW or CREATE MACRO")
            words = _BATCH_WORDS.match(said[0])
            if words is None:
                raise ValueError(
                    f"{where}: expected `-- batch: shared [always] [from <view> via <view> [as view]] "
                    "[without <column>, ...]`, "
                    f"got {block[found[0]].strip()!r}"
                )
            kind, name, params, table = create.groups()
            macro = kind.upper() == "MACRO"
            if macro and (table is None or len([p for p in params.split(",") if p.strip()]) != 1):
                raise ValueError(f"{where}: {name} must be a table macro of one argument (a rules version)")
            always, source, stand_in, as_view, without = words.groups()
            if macro and (without or as_view):
                raise ValueError(f"{where}: `without` is for a view (a macro's tables are what its versions return)")
            dropped = tuple(c.strip().lower() for c in without.split(",")) if without else ()
            out.append(
                BatchView(
                    name.lower(), module.path, macro, always is not None, source, stand_in, dropped, as_view is not None
                )
            )
        block_start = i + 1
    return out


@lru_cache(maxsize=1)
def batch_views() -> tuple[BatchView, ...]:
    """Every view and macro with a ``-- batch:`` line, each after the others it reads
    (``names_reached``; a derived one after its source too), else in load order. A
    ValueError for a name declared twice, a source that is not shared, a stand-in that
    does not read its source, or views that read each other."""
    found: dict[str, BatchView] = {}
    for module in view_modules():
        for view in parse_batch_lines(module):
            if view.name in found:
                raise ValueError(f"sql/views: {view.name} has a `-- batch:` line in two places")
            found[view.name] = view
    needs: dict[str, frozenset[str]] = {}
    for name, view in found.items():
        reads = names_reached(f"SELECT * FROM {name}")
        if view.source is not None:
            if view.source not in found or found[view.source].source is not None:
                raise ValueError(f"{view.path}: {name} is derived from {view.source}, which is not shared itself")
            stand_in = names_reached(f"SELECT * FROM {view.stand_in}")
            if view.source not in stand_in:
                raise ValueError(f"{view.path}: {name}'s stand-in {view.stand_in} does not read {view.source}")
            reads |= stand_in
        needs[name] = reads & found.keys() - {name}
    ordered: list[BatchView] = []
    placed: set[str] = set()
    while len(ordered) < len(found):
        ready = [v for n, v in found.items() if n not in placed and needs[n] <= placed]
        if not ready:
            raise ValueError(f"sql/views: these shared views read each other: {sorted(found.keys() - placed)}")
        ordered.append(ready[0])
        placed.add(ready[0].name)
    return tuple(ordered)


# --- documentation in DuckDB's catalog (COMMENT ON) ------------------------------------

_CREATE_VIEW = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?VIEW\s+(\w+)", re.IGNORECASE)
_RELATION = re.compile(r"^--\s*relation:\s*(\w+)\s*$")
_LOADER_LINE = re.compile(r"^\s*(requires|extends|relation):")
_BATCH_LINE = re.compile(r"^\s*batch:")
_COLUMNS = re.compile(r"^\s*columns:\s*$")
_COLUMN = re.compile(r"^(\s+)(\w+)(?:\s{2,}(\S.*))?$")
_AS_IN = re.compile(r"^\s*\(as in (\w+):(.*)$")


@dataclass(frozen=True)
class RelationDoc:
    """A view's (or base relation's) documentation: its comment text, the phrase of each
    column it documents, and the columns that take their phrase from another relation."""

    name: str
    text: str
    columns: dict[str, str]
    inherited: dict[str, str]  # column -> the relation whose phrase it takes


def parse_doc_block(lines: list[str]) -> tuple[str, dict[str, str], dict[str, str]]:
    """A comment block (lines starting ``--``) as (text, columns, inherited columns).

    ``-- columns:`` starts the column list; each entry is ``--<indent><name>  <phrase>``
    (two or more spaces between), lines indented deeper continue the phrase, and
    ``--<indent>(as in <relation>: a, b, ...)`` (on one or more lines) gives columns the
    phrase they have in ``<relation>``. The first line indented less than the entries, or
    not an entry, ends the list; the other lines are the relation's text (their layout
    kept). Loader lines (``requires:``, ``extends:``, ``relation:``) are left out, and so
    are a ``batch:`` line and the lines after it (its note, ``batch_views``)."""
    text: list[str] = []
    columns: dict[str, str] = {}
    inherited: dict[str, str] = {}
    in_columns, indent, last, as_in = False, 0, None, None
    pending = ""
    for line in lines:
        body = line[2:]
        if _BATCH_LINE.match(body):
            break  # the batch line and its indented note end the block (``batch_views``)
        if _LOADER_LINE.match(body):
            continue
        if _COLUMNS.match(body):
            in_columns, indent, last = True, 0, None
            continue
        if as_in is not None:
            pending += " " + body.strip()
        elif in_columns:
            m_as = _AS_IN.match(body)
            m = _COLUMN.match(body)
            depth = len(body) - len(body.lstrip())
            if m_as:
                as_in, pending = m_as.group(1), m_as.group(2)
            elif m and (indent == 0 or depth == indent):
                indent, last = depth, m.group(2)
                columns[last] = (m.group(3) or "").strip()
                continue
            elif last is not None and body.strip() and depth > indent:
                columns[last] = (columns[last] + " " + body.strip()).strip()
                continue
            else:
                in_columns = False
        if as_in is not None:
            if ")" in pending:
                names = pending[: pending.index(")")]
                inherited.update({n.strip(): as_in for n in names.split(",") if n.strip()})
                as_in = None
            continue
        if not in_columns and body.strip():
            text.append((body[1:] if body.startswith(" ") else body).rstrip())
    return "\n".join(text), columns, inherited


def doc_blocks(sql: str) -> list[RelationDoc]:
    """The documented relations of a SQL file: the comment block right above each
    ``CREATE ... VIEW <name>``, and each block that starts ``-- relation: <name>``."""
    out: list[RelationDoc] = []
    block: list[str] = []

    def close_relation() -> None:
        named = _RELATION.match(block[0]) if block else None
        if named:
            out.append(RelationDoc(named.group(1), *parse_doc_block(block)))

    for line in sql.splitlines() + [""]:
        if line.startswith("--"):
            block.append(line)
            continue
        m = _CREATE_VIEW.match(line)
        if m and block and not _RELATION.match(block[0]):
            out.append(RelationDoc(m.group(1), *parse_doc_block(block)))
        else:
            close_relation()
        block = []
    return out


@lru_cache(maxsize=1)
def relation_docs() -> dict[str, RelationDoc]:
    """Every documented relation by name: the base relations (sql/relations.sql) and the
    views of every module (the last definition of a name wins, as in DuckDB)."""
    docs = {d.name: d for d in doc_blocks((sql_root() / "relations.sql").read_text())}
    for module in view_modules():
        docs.update({d.name: d for d in doc_blocks(module.sql)})
    return docs


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_docs(doc: RelationDoc) -> dict[str, str]:
    """A relation's column phrases, the inherited ones looked up."""
    docs = relation_docs()
    out = {}
    for column, source in doc.inherited.items():
        phrase = docs[source].columns.get(column) if source in docs else None
        if not phrase:
            raise ValueError(f"{doc.name}: column {column} is documented as in {source}, which does not document it")
        out[column] = phrase
    out.update({c: p for c, p in doc.columns.items() if p})
    return out


def comment_statements(name: str, kind: str = "VIEW", doc: RelationDoc | None = None) -> list[str]:
    """``COMMENT ON`` statements that put relation ``name``'s documentation (``doc``, else
    the one ``relation_docs`` has) into DuckDB's catalog (``duckdb_views().comment``,
    ``duckdb_columns().comment``); ``kind`` is VIEW or TABLE. Names come from our own
    files; the texts are quoted as literals."""
    doc = doc or relation_docs().get(name)
    if doc is None:
        return []
    out = [f"COMMENT ON {kind} {_ident(name)} IS {_literal(doc.text)};"] if doc.text else []
    out += [f"COMMENT ON COLUMN {_ident(name)}.{_ident(c)} IS {_literal(p)};" for c, p in column_docs(doc).items()]
    return out


def module_script(module: ViewModule) -> str:
    """A module's SQL, then the COMMENT ON statements of the views it defines."""
    comments = [s for d in doc_blocks(module.sql) for s in comment_statements(d.name, doc=d)]
    return module.sql.strip() + ("\n" + "\n".join(comments) if comments else "") + "\n"
