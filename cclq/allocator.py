"""How a cclq process allocates Arrow memory: from the C library's ``malloc``.

pyarrow's default pool (its bundled mimalloc) reserves 1 GiB of address space when it
starts and grows in more such arenas; DuckDB and Python use ``malloc``. Under an
address-space limit (``prlimit --as``, ``ulimit -v`` on a shared cluster node) the
reservations alone made metrics fail with a few hundred MB resident. With ``malloc`` for
Arrow too, ``cclq report dlrm_param_8xV100`` peaked at 1.37 GB of address space instead of
3.2 GB, at the same speed (1.55-1.83 s both ways), and ``cclq ingest`` of
``hta_df_index_resolver`` took 1.08 s and 225 MB instead of 1.31 s and 275 MB.

The entry points (the CLI's package, the CCL-Bench daemon) call ``use_system_allocator``
before pyarrow is imported: modules allocate small arrays when they load, and the first
allocation from mimalloc makes its reservation. Child processes inherit the choice. A
pool named in ``ARROW_DEFAULT_MEMORY_POOL`` is left alone.
"""

from __future__ import annotations

import os
import sys

POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_allocator() -> None:
    """Makes pyarrow allocate with ``malloc`` (see the module docstring): through the
    environment when pyarrow is not loaded yet, else by setting its default pool."""
    if os.environ.get(POOL_ENV):
        return
    if "pyarrow" not in sys.modules:
        os.environ[POOL_ENV] = "system"
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
