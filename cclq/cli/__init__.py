"""The ``cclq`` command line (``app.py``).

A CLI process allocates Arrow memory with ``malloc`` (``cclq.allocator``): set here, before
``app`` imports pyarrow.
"""

from cclq.allocator import use_system_allocator

use_system_allocator()
