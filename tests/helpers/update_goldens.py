"""Writes the goldens of released metric versions (``tests/helpers/goldens.py``).

    python -m tests.helpers.update_goldens                    # add what is missing
    python -m tests.helpers.update_goldens --rewrite mfu/v1   # rewrite one, on purpose

Run from the repository root. Without ``--rewrite`` it writes the golden of each released
version that has none and adds to a golden the workloads it does not cover yet; a recorded
row is never changed. ``--rewrite`` replaces the named goldens wholesale: a released number
moved on purpose (say why in the commit message). A test run never writes a golden.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from .goldens import Golden, compute, golden_path, released


def _write(path: Path, text: str) -> None:
    """A new file renamed over the old one: a reader never sees half a golden."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _shown(path: Path) -> str:
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def update(rewrite: set[str], fresh: dict[str, Golden]) -> list[str]:
    """Writes the goldens from ``fresh`` (``compute``); returns one line per file written."""
    known = {f"{s.name}/v{s.version}": s for s in released()}
    unknown = sorted(rewrite - set(known))
    if unknown:
        raise SystemExit(f"update_goldens: not a released version: {', '.join(unknown)}")
    done = []
    for label, spec in known.items():
        path = golden_path(spec)
        got = fresh[label]
        if label in rewrite or not path.exists():
            _write(path, got.text())
            done.append(f"{'rewrote' if label in rewrite else 'wrote'} {_shown(path)}")
            continue
        old = Golden.parse(path.read_text())
        new_traces = sorted(set(got.rows) - set(old.rows))
        if not new_traces:
            continue
        if old.columns != got.columns:
            raise SystemExit(
                f"update_goldens: {label} has other columns than its golden; "
                f"a released version never changes (see tests/query/test_goldens.py)"
            )
        old.rows.update({t: got.rows[t] for t in new_traces})
        _write(path, old.text())
        done.append(f"added {', '.join(new_traces)} to {_shown(path)}")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.helpers.update_goldens",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--rewrite", action="append", default=[], metavar="METRIC/vN", help="rewrite this golden (repeatable)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cclq-goldens-") as tmp:
        os.environ.setdefault("CCLQ_CACHE_DIR", str(Path(tmp) / "cache"))
        lines = update(set(args.rewrite), compute(Path(tmp)))
    print("\n".join(lines) if lines else "every golden is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
