"""The daemon's own process: ``python -m cclq.compat.daemon_process --warehouse WH``.

``cclq.compat.daemon`` starts it (and ``--stop`` ends it). It lives apart from the
daemon module so that the daemon serves any handler it is given and imports nothing of
the work it runs: this module hands it ``cclq.compat.main.run_here``, behind
``cclq.compat.warm.WarmCalls`` (sibling folders ingested together, a metric computed for
all of them at once).
"""

from __future__ import annotations

import argparse
import os

from cclq.compat.daemon import DEFAULT_IDLE_S, IDLE_ENV, stop
from cclq.compat.daemon_server import serve_calls
from cclq.compat.main import run_here
from cclq.compat.warm import WarmCalls
from cclq.locations import resolve_warehouse
from cclq.runtime import prepare_process


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m cclq.compat.daemon_process",
        description="The warm process behind python -m cclq.main (see cclq/compat/daemon.py).",
    )
    parser.add_argument("--warehouse", help="warehouse folder [default: $CCLQ_WAREHOUSE or ./.cclq/warehouse]")
    parser.add_argument("--stop", action="store_true", help="stop the warehouse's daemon")
    args = parser.parse_args()
    wh_root = resolve_warehouse(args.warehouse)
    if args.stop:
        print("stopped" if stop(wh_root) else "no daemon running")
        return
    prepare_process()  # before pyarrow is imported (cclq.runtime)
    serve_calls(wh_root, WarmCalls(run_here), float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_S), warm_up=warm_up)


def warm_up() -> None:
    """The heavy imports, once, by the daemon that holds the warehouse's lock: what makes
    a call warm (a second daemon started at the same moment leaves before them)."""
    import cclq.ingest.run
    import cclq.query.engine
    import cclq.query.metrics  # noqa: F401


if __name__ == "__main__":
    main()
