"""``python -m cclq`` is the same as the ``cclq`` command."""

from cclq.cli.app import main

main()
