"""``python -m cclq.main --trace DIR --metric NAME``: CCL-Bench's calling convention.

The module path is CCL-Bench's contract, so it stays here; the work is done by
``cclq.compat.main``.
"""

from cclq.compat.main import main

if __name__ == "__main__":
    raise SystemExit(main())
