"""Workload cards as untrusted input: values that fit no column, YAML alias bombs."""

from __future__ import annotations

import subprocess
import sys
import time

from helpers.traces import gpu_trace
from helpers.warehouse import query, run_ingest


def test_a_card_with_numbers_that_fit_no_column_does_not_stop_the_ingest(tmp_path, wh):
    for name, count in (("inf", ".inf"), ("huge", "1e30"), ("ok", "8")):
        gpu_trace(tmp_path / "in" / name / "rank0.json")
        (tmp_path / "in" / name / "workload_card.yaml").write_text(
            f"workload:\n  hardware:\n    xpu_spec:\n      total_count: {count}\n"
        )
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    assert query(wh, "SELECT trace, total_count, card_json::JSON IS NOT NULL FROM cards ORDER BY trace") == [
        ("huge", None, True),
        ("inf", None, True),
        ("ok", 8, True),
    ]


# -------------------------------------------------------- 11. YAML alias bomb
_CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB: the bomb needs > 3 GB
from cclq.cli.app import main
sys.argv = ["cclq", *sys.argv[1:]]
main()
"""


def test_a_yaml_alias_bomb_in_a_card_is_refused(tmp_path):
    root = tmp_path / "work"
    gpu_trace(root / "rank0.json")
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]" for i in range(1, 10)]
    (root / "workload_card.yaml").write_text("\n".join(levels) + "\n")
    assert len((root / "workload_card.yaml").read_bytes()) < 1000
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED, "ingest", str(root), "-w", str(tmp_path / "wh"), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - start < 60
    assert done.returncode == 0, done.stderr
    assert (
        f"cclq: warning: {root / 'workload_card.yaml'}: invalid YAML: YAML aliases (*a0) are not allowed "
        "in a workload card"
    ) in done.stderr
