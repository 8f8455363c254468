"""Where things are: the warehouse (``--warehouse``, else ``$CCLQ_WAREHOUSE``, else
``./.cclq/warehouse``), the package's own files and the SQL folder.

Standard library only, so that a light process (the client half of ``python -m cclq.main``,
see ``cclq/compat/daemon.py``) can find the warehouse without importing pyarrow or DuckDB.
"""

from __future__ import annotations

import os

# pathlib only when a Path is asked for: the client half of a warm `python -m cclq.main`
# call finds its warehouse with os.path (``warehouse_path``), and pathlib's import is ~12 ms
# of its start. (A local TYPE_CHECKING, not typing's, for the same reason; mypy reads it.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    PACKAGE_DIR: Path  # the installed (or checked-out) cclq/

DEFAULT_WAREHOUSE = ".cclq/warehouse"
WAREHOUSE_ENV = "CCLQ_WAREHOUSE"


# package_dir and sql_root, found once (resolving the path took 0.15 ms, for each metric
# folder a process reads); a dict, not functools' cache, which the light client half of
# `python -m cclq.main` does not import
_found: dict[str, Path] = {}


def package_dir() -> Path:
    """The installed (or checked-out) cclq/ folder."""
    if "package" not in _found:
        from pathlib import Path

        _found["package"] = Path(__file__).resolve().parent
    return _found["package"]


def __getattr__(name: str) -> Path:
    if name == "PACKAGE_DIR":  # made when first used (PEP 562)
        return package_dir()
    raise AttributeError(f"module 'cclq.locations' has no attribute {name!r}")


def sql_root() -> Path:
    """The SQL folder: ``cclq/sql`` in a wheel (pyproject maps it there), ``sql/`` beside
    the package in a checkout."""
    if "sql" not in _found:
        packaged, checkout = package_dir() / "sql", package_dir().parent / "sql"
        if packaged.is_dir():
            _found["sql"] = packaged
        elif checkout.is_dir():
            _found["sql"] = checkout
        else:
            raise FileNotFoundError("cclq's sql/ folder is missing from this installation")
    return _found["sql"]


def user_cache_dir() -> Path:
    """``$CCLQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/cclq``, else ``~/.cache/cclq``: what
    cclq keeps between runs that can be made again (compiled views, object-storage copies)."""
    from pathlib import Path

    chosen = os.environ.get("CCLQ_CACHE_DIR")
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cclq"


def warehouse_path(option: str | None) -> str:
    """``--warehouse`` first, then ``$CCLQ_WAREHOUSE``, then ``./.cclq/warehouse``; absolute,
    links resolved (what ``Path.resolve`` gives), as text."""
    chosen = option or os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE
    if "://" in chosen:  # never a local folder named after a URL (./s3:/bucket)
        from cclq.errors import UsageError

        raise UsageError(
            f"{chosen}: a URL where a local warehouse folder is needed",
            hint="this command takes a folder; `cclq ingest`, `metric`, `report`, `diff`, `board`, "
            "`sql`, `traces`, `shell` and cclq.open() take s3:// URLs",
        )
    return os.path.realpath(os.path.expanduser(chosen))


def resolve_warehouse(option: str | None) -> Path:
    """``warehouse_path`` as a Path."""
    from pathlib import Path

    return Path(warehouse_path(option))
