"""The two documented ways to CCL-Bench's website data give the same file, cell for cell:
its ``website/generate_data.py`` calling ``tools/main.py`` (cclq's shim, so
``python -m cclq.main`` once per value) and ``cclq board --config`` in one process, both
from one ``benchmark_config.json`` (docs/ccl-bench.md, steps 2 and 3).

With a CCL-Bench checkout beside this repository (``../ccl-bench``, or
``$CCL_BENCH_CHECKOUT``), its own ``generate_data.py`` runs and every cell is compared:
rows, metadata, metrics, ``all_metrics``, ``metric_info``, ``metric_categories``. Without one,
a generator written here from its documented rules (a pair's metrics, ``required_update``,
the last stdout line as a float with 6 significant digits, nan and -1 as null) runs and the
metric cells are compared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.cards import GPU_CARD, TPU_CARD
from helpers.ccl_bench import build_gpu, build_tpu
from helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = Path(os.environ.get("CCL_BENCH_CHECKOUT", ROOT.parent / "ccl-bench"))

# Units as CCL-Bench's own config gives them; percent, GB/s, seconds, ratios and GB.
METRIC_INFO = {
    "avg_step_time": {"unit": "s", "trace_types": ["json_tpu", "json"], "category": "model_execution"},
    "ttft": {"unit": "s", "phases": ["inference"], "trace_types": ["json_tpu", "json"], "category": "model_execution"},
    "mean_sm_coverage": {"unit": "%", "trace_types": ["nsys", "json"], "category": "gpu_efficiency"},
    "dominant_kernel_concentration": {
        "unit": "%",
        "trace_types": ["nsys", "json", "json_tpu"],
        "category": "gpu_efficiency",
    },
    "average_memory_bandwidth": {"unit": "GB/s", "trace_types": ["nsys", "json", "json_tpu"], "category": "memory"},
    "communication_fraction": {
        "unit": "%",
        "trace_types": ["nsys", "json", "json_tpu"],
        "category": "communication",
        "required_update": True,
    },
    "total_communication_time": {"unit": "s", "trace_types": ["nsys", "json", "json_tpu"], "category": "communication"},
    "bandwidth_utilization_allreduce_group_6": {
        "unit": "GB/s",
        "trace_types": ["json", "json_tpu"],
        "category": "communication",
    },
    "compute_comm_overlap": {"unit": "%", "trace_types": ["json", "json_tpu", "nsys"], "category": "communication"},
    "load_imbalance_ratio": {"unit": "ratio", "trace_types": ["nsys", "json"], "category": "communication"},
    "straggler": {"unit": "ratio", "trace_types": ["json"], "category": "communication"},
    "collective_vol_allreduce_gb": {
        "unit": "GB",
        "trace_types": ["json", "tpu_profiler", "json_tpu"],
        "category": "communication",
    },
}
CATEGORIES = [{"id": "communication", "label": "Communication", "description": "as CCL-Bench's"}]

# A generator from generate_data.py's documented rules (its module docstring and README),
# for a machine without a CCL-Bench checkout: the metric cells only.
GENERATOR = textwrap.dedent("""\
    import json, subprocess, sys
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    import yaml

    config = json.loads(Path("website/benchmark_config.json").read_text())
    info = config["metric_info"]

    def card(folder):
        found = sorted(Path(folder).glob("*.yaml"))
        return (yaml.safe_load(found[0].read_text()) or {}) if found else {}

    def chosen(pair):
        if pair.get("metrics", "auto") != "auto":
            return pair["metrics"]
        doc = card(pair["trace"])
        types = set((doc.get("metric_source") or {}).get("traces") or [])
        phase = str(((doc.get("workload") or {}).get("model") or {}).get("phase") or "").lower()
        return [m for m, i in info.items() if types & set(i.get("trace_types", []))
                and (not i.get("phases") or phase in {str(p).lower() for p in i["phases"]})]

    def value(trace, metric):
        p = subprocess.run([sys.executable, "tools/main.py", "--trace", trace, "--metric", metric],
                           capture_output=True, text=True)
        lines = [l.strip() for l in p.stdout.splitlines() if l.strip()]
        if p.returncode != 0 or not lines:
            return None
        try:
            v = float(lines[-1])
        except ValueError:
            return lines[-1]
        return None if v != v or v == -1.0 else float(f"{v:.6g}")

    work = [(pair["trace"], m) for pair in config["pairs"] for m in chosen(pair)]
    with ThreadPoolExecutor(32) as pool:
        values = dict(zip(work, pool.map(lambda tm: value(*tm), work)))
    rows = [{"trace": pair["trace"], "metrics": {m: values[(pair["trace"], m)] for m in chosen(pair)}}
            for pair in config["pairs"]]
    Path("website/benchmark_data.json").write_text(json.dumps({"rows": rows}, indent=2))
""")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, Path]:
    """A CCL-Bench checkout switched to cclq, three trace folders and a config naming them."""
    root = tmp_path_factory.mktemp("parity")
    traces = root / "traces"
    build_gpu(traces / "gpu_run", card=GPU_CARD)
    build_tpu(traces / "tpu_run")
    (traces / "tpu_run" / "workload_card.yaml").write_text(TPU_CARD)
    build_gpu(traces / "no_card_run", card=None)
    repo = root / "ccl-bench"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "main.py").write_text("# CCL-Bench's dispatcher\n")
    (repo / "website").mkdir()
    (repo / "website" / "styles.css").write_text("body {}\n")
    (repo / "index.html").write_text("<!-- STYLES_START -->\n<!-- STYLES_END -->\n")
    real = (CHECKOUT / "website" / "generate_data.py").is_file()
    if real:
        shutil.copy(CHECKOUT / "website" / "generate_data.py", repo / "website" / "generate_data.py")
    else:
        (repo / "website" / "generate_data.py").write_text(GENERATOR)
    assert invoke("ccl-bench", "shim", str(repo), "--force").returncode == 0
    pairs = [
        {"trace": str(traces / "gpu_run"), "metrics": "auto", "required_update": True},
        {"trace": str(traces / "tpu_run") + "/", "metrics": "auto"},  # as written, with the slash
        {
            "trace": "../traces/no_card_run",
            "metrics": ["avg_step_time", "mean_sm_coverage", "straggler", "bandwidth_utilization_allreduce_group_6"],
        },
    ]
    config = {
        "_comment": "one config, two generators",
        "pairs": pairs,
        "metric_categories": CATEGORIES,
        "metric_info": METRIC_INFO,
    }
    (repo / "website" / "benchmark_config.json").write_text(json.dumps(config, indent=2))
    return {"repo": repo, "real": Path("real") if real else Path("replica")}


@pytest.mark.slow
def test_generate_data_through_the_shim_and_board_config_write_the_same_cells(site):
    repo = site["repo"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CCLQ_DAEMON": "0"}
    env.pop("CCLQ_WAREHOUSE", None)
    # both run from the checkout's root, where generate_data.py must run (the relative
    # pair is relative to it)
    proc = subprocess.run(
        [sys.executable, "website/generate_data.py"], capture_output=True, text=True, cwd=repo, env=env
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    via_shim = json.loads((repo / "website" / "benchmark_data.json").read_text())
    out = repo.parent / "board_out"
    proc = invoke(
        "board",
        str(out),
        "-q",
        "--config",
        str(repo / "website" / "benchmark_config.json"),
        "-w",
        str(repo / ".cclq" / "warehouse"),
        cwd=repo,
    )
    assert proc.returncode == 0, proc.stderr
    board = json.loads((out / "benchmark_data.json").read_text())
    assert [r["trace"] for r in board["rows"]] == [r["trace"] for r in via_shim["rows"]]
    for mine, theirs in zip(board["rows"], via_shim["rows"]):
        assert mine["metrics"] == theirs["metrics"], mine["trace"]
        if str(site["real"]) == "real":
            assert mine["metadata"] == theirs["metadata"], mine["trace"]
    if str(site["real"]) == "real":
        for key in ("all_metrics", "metric_info", "metric_categories"):
            assert board[key] == via_shim[key], key
    # in CCL-Bench's units, worked out from the GPU run (tests/query/test_ccl_bench_names.py):
    # per rank GEMMs of 400 + 500 + 300 us, communication 200 (rank 1: 300) + 40 + 100 us
    gpu = board["rows"][0]["metrics"]
    # the top kernel name, GEMM, 2 x 1200 of 3180 us of kernels: percent
    assert gpu["dominant_kernel_concentration"] == float(f"{2400 / 3180 * 100:.6g}")
    # all-reduces of 4 MB in 200, 100, 300, 100 us on 2 ranks (bus factor 1): 20, 40, 13.3,
    # 40 GB/s, median 30 GB/s
    assert gpu["bandwidth_utilization_allreduce_group_6"] == 30.0
    # (440 - 340) / 440 of the ranks' communication time: a ratio, as CCL-Bench prints it
    assert gpu["straggler"] == float(f"{100 / 440:.6g}")
