"""The ``cclq`` command line: ``app.py`` (the app, ``main()``), a module per command group.

A CLI process allocates Arrow memory with ``malloc`` and keeps pyarrow from importing
pandas (``cclq.runtime``): set here, before ``app`` imports pyarrow.
"""

from cclq.runtime import prepare_process

prepare_process()
