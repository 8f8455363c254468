"""Nsight Systems SQLite exports (``nsys export --type sqlite``), read with ``sqlite3``.

Every activity becomes an ``events`` row in the same shape a Kineto trace gives, so that
``kernels``, ``gpu_ops_classified``, ``collectives`` and the GPU metrics run unchanged:

===========================================  ==================================================
nsys table                                   events rows
===========================================  ==================================================
``CUPTI_ACTIVITY_KIND_KERNEL``               ``cat = 'kernel'``; name = the demangled name
                                             (``StringIds``), short name in ``args``; device,
                                             stream, correlation, grid, block, registers, shared
                                             memory; ``blocks_per_sm`` = grid blocks / the GPU's
                                             SM count, as CUPTI gives Kineto
``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET``  ``gpu_memcpy`` / ``gpu_memset``, named as Kineto
                                             names them (``Memcpy HtoD (Pageable -> Device)``),
                                             with ``bytes`` and the copy kind
``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``      ``cuda_sync`` (``Event Sync``, ``Stream Sync``, ...)
``CUPTI_ACTIVITY_KIND_RUNTIME`` / ``_DRIVER``  ``cuda_runtime`` / ``cuda_driver`` (API names without
                                             nsys's ``_v3020`` version suffix), with correlation
``NVTX_EVENTS``                              ranges: ``user_annotation`` (``cat_raw = 'nvtx'``,
                                             the domain in ``args``); marks: instants; thread
                                             names (``MPI Rank 3``): ``thread_name`` metadata
``OSRT_API``, ``MPI_*_EVENTS``                ``os_runtime``, ``mpi``
``PROCESSES``, ``ThreadNames``               ``process_name`` / ``thread_name`` metadata (``M``)
===========================================  ==================================================

GPU rows have ``pid`` = the device and ``tid`` = the stream (as in Kineto); CPU rows the
OS pid and tid from nsys's ``globalTid``. Time: nsys counts integer ns from the session
start; ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` is added, so ``ts_ns`` is epoch ns.

Ranks. A file whose GPU work comes from one process is one rank: the file name's number
(``nsys_3.sqlite``), else the process's MPI rank (``MPI_RANKS``, or NVTX's thread name
``MPI Rank N`` that nsys's MPI tracing writes), else ingest's default. An export of a
whole node (several processes, or one process on several GPUs) holds several ranks:
each process's MPI rank when every GPU process has one, else each GPU is a rank (its CUDA
device id); CPU rows go with their process's GPU, rows of processes without GPU work
with the lowest rank.

A table that an export lacks is simply absent (no memsets recorded); a table without a
column cclq needs fails the file with a message naming both (nsys changes its schema
between versions).

An export is a file like any other input, so it is read as untrusted: opened read-only
and ``immutable``; only tables named as Nsight names them (``_NSIGHT_NAME``) are seen,
and every table name goes into SQL through ``quote_ident``; SQLite's temp store is kept
in memory under a heap bound, its values under the string bound, and its run time under
a deadline (``cclq.formats.limits``); values that are not integers where nsys writes
integers are read as NULL, and times whose epoch value leaves int64 are dropped as
``bad ts`` / ``bad dur``, as the JSON readers do.
"""

from cclq.formats.nsys.export import detect_sqlite, quote_ident
from cclq.formats.nsys.reader import NsysReader

__all__ = ["NsysReader", "detect_sqlite", "quote_ident"]
