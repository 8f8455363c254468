"""Records HTA 0.5.0's answers to its own example notebooks for tests/api/test_hta_notebooks.py.

Run from the repository's root with an interpreter that has HolisticTraceAnalysis==0.5.0
(a throwaway venv; HTA is not a cclq dependency and nothing of cclq is imported here):

    python -m venv /tmp/htaenv
    /tmp/htaenv/bin/pip install HolisticTraceAnalysis==0.5.0 pandas==2.2.3 numpy==1.26.4
    /tmp/htaenv/bin/python tests/hta_golden/generate_notebooks.py ../shared/traces

Each variant of tests/helpers/hta_notebooks.py (VARIANTS) runs, unchanged but for what that
module's docstring lists, on a fresh copy of the trace folders, and what every cell shows
(helpers.hta_notebooks.describe) is written to
tests/hta_golden/notebooks/answers/<variant>.json.gz.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers import hta_notebooks as nb  # noqa: E402


def main(shared: Path) -> None:
    nb.ANSWERS.mkdir(parents=True, exist_ok=True)
    wanted = set(sys.argv[2:])
    for variant in nb.VARIANTS:
        if wanted and variant.name not in wanted:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            root, scratch = Path(tmp) / "HolisticTraceAnalysis", Path(tmp) / "scratch"
            scratch.mkdir()
            nb.make_tree(root, shared)
            results, ns = nb.run(variant, root, scratch, use_cclq=False)
            answers = nb.record(results, nb.probe(variant, ns, root, scratch), nb.overlays(root))
        with gzip.open(nb.ANSWERS / f"{variant.name}.json.gz", "wt") as f:
            json.dump(answers, f, indent=0)
        failed = [f"cell {r.cell}: {r.error}" for r in results if r.error]
        print(variant.name, f"{len(results)} cells", "; ".join(failed) or "no errors")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
