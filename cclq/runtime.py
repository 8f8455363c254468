"""How a cclq command's process is set up before pyarrow loads (the CLI's package and the
CCL-Bench daemon call ``prepare_process`` first; forked workers inherit it).

* **Arrow's memory from ``malloc``.** pyarrow's default pool (its bundled mimalloc)
  reserves 1 GiB of address space when it starts and grows in more such arenas; DuckDB
  and Python use ``malloc``. Under an address-space limit (``prlimit --as``, ``ulimit -v``
  on a shared cluster node) the reservations alone made metrics fail with a few hundred
  MB resident. With ``malloc`` for Arrow too, ``cclq report dlrm_param_8xV100`` peaked at
  1.37 GB of address space instead of 3.2 GB, at the same speed (1.55-1.83 s both ways),
  and ``cclq ingest`` of ``hta_df_index_resolver`` took 1.08 s and 225 MB instead of
  1.31 s and 275 MB. A pool named in ``ARROW_DEFAULT_MEMORY_POOL`` is left alone.
* **pyarrow without pandas.** The first time pyarrow converts any Python value
  (``pa.scalar(0)``, ``pa.array([1])``) it imports pandas, where installed, to check
  whether the value is a pandas object: 165-220 ms and ~40 MB in every command, for a
  check that cannot succeed in a process that never imported pandas. Its check is made
  once with the import blocked, so it finds none; a conversion *to* pandas
  (``Table.to_pandas``) still imports it as usual.
* **Two malloc arenas where the address space is limited.** glibc's malloc gives threads
  that allocate at once arenas of their own, each reserving 64 MiB of address space (up
  to 8 a core), and DuckDB's and Arrow's threads all allocate: under ``prlimit --as`` the
  arenas, not the data, ran a board out of address space. With a limit (and no
  ``MALLOC_ARENA_MAX`` given), two arenas; without one, glibc's default.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def prepare_process() -> None:
    """Both settings of the module docstring, before anything else loads pyarrow."""
    use_system_allocator()
    pyarrow_without_pandas()
    fewer_malloc_arenas()


def use_system_allocator() -> None:
    """Makes pyarrow allocate with ``malloc``: through the environment when pyarrow is not
    loaded yet (modules allocate small arrays as they load, and the first allocation from
    mimalloc makes its reservation), else by setting its default pool."""
    if os.environ.get(POOL_ENV):
        return
    if "pyarrow" not in sys.modules:
        os.environ[POOL_ENV] = "system"
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def pyarrow_without_pandas() -> None:
    """pyarrow's check for pandas objects, made once with pandas' import blocked (see the
    module docstring); nothing where pandas is loaded already. Where pyarrow is not loaded
    yet, the check is made right after it loads (``_AfterPyarrow``): ``cclq --help`` and a
    command that never touches Arrow do not pay the ~140 ms of importing pyarrow."""
    if "pandas" in sys.modules:
        return
    if "pyarrow" not in sys.modules:
        if _AfterPyarrow not in sys.meta_path:
            sys.meta_path.insert(0, _AfterPyarrow)
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.scalar(0)
    finally:
        sys.meta_path.remove(_NoPandas)


M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
LIMITED_ARENAS = 2


def fewer_malloc_arenas() -> None:
    """Caps glibc's malloc arenas (see the module docstring) where RLIMIT_AS is set."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux") or address_space_limit() is None:
        return
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # absent where the libc is not glibc
    if mallopt is not None:
        mallopt(M_ARENA_MAX, LIMITED_ARENAS)


def address_space_limit() -> int | None:
    """The address space this process may map (RLIMIT_AS), or None where unlimited."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


class _AfterPyarrow:
    """A meta path finder waiting for ``import pyarrow``: it finds pyarrow as usual and makes
    ``pyarrow_without_pandas``'s check as soon as the package has run."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name != "pyarrow":
            return None
        sys.meta_path.remove(_AfterPyarrow)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def run_then_check(module: ModuleType) -> None:
            run(module)
            pyarrow_without_pandas()

        loader.exec_module = run_then_check  # type: ignore[method-assign]
        return spec


class _NoPandas:
    """A meta path finder for the moment of that check: pandas cannot be found."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (cclq.runtime)", name=name)
        return None
