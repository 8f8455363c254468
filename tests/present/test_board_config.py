"""``cclq board OUT --config benchmark_config.json``: CCL-Bench's website config read as
it is (pairs, "auto" or listed metrics, required_update per pair and per metric), and
``--write-config``. Expected rows are written out by hand from the traces of
tests/helpers/ccl_bench.py (two ranks, inner step 1000 us, compute kernels 1200 us a
rank; a TPU profile with 10 us of communication device time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cards import GPU_CARD, TPU_CARD
from helpers.ccl_bench import build_gpu, build_tpu
from helpers.cli import invoke

from cclq.present.board.ccl_bench import build_from_config
from cclq.present.board.config import auto_metrics, six_digits
from cclq.store.warehouse import Warehouse

METRIC_INFO = {
    "avg_step_time": {
        "label": "Step Time (s)",
        "unit": "s",
        "trace_types": ["json", "json_tpu"],
        "category": "model_execution",
    },
    "ttft": {"unit": "s", "trace_types": ["json"], "phases": ["inference"], "category": "model_execution"},
    "kernel_compute_time_group_6": {"unit": "s", "trace_types": ["json"], "category": "gpu_efficiency"},
    "comm_kernel_breakdown_tpu": {"unit": "s", "trace_types": ["json_tpu"], "category": "communication"},
    "straggler": {"unit": "ratio", "trace_types": ["nsys"], "category": "communication"},
    "communication_overhead": {"unit": "%", "trace_types": ["json"], "category": "communication"},
}
CATEGORIES = [{"id": "model_execution", "label": "Model Execution", "description": "from the config"}]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cfg")
    build_gpu(root / "traces" / "gpu_run", card=GPU_CARD)
    build_tpu(root / "traces" / "tpu_run")
    (root / "traces" / "tpu_run" / "workload_card.yaml").write_text(TPU_CARD)
    return {"root": root, "gpu": root / "traces" / "gpu_run", "tpu": root / "traces" / "tpu_run"}


def write_config(path: Path, pairs: list[dict], info: dict | None = None) -> Path:
    path.write_text(
        json.dumps(
            {"pairs": pairs, "metric_categories": CATEGORIES, "metric_info": info if info is not None else METRIC_INFO}
        )
    )
    return path


def rows_of(out: Path) -> dict[str, dict]:
    data = json.loads((out / "benchmark_data.json").read_text())
    return {r["trace"]: r for r in data["rows"]}


def test_auto_follows_trace_types_and_phases():
    assert auto_metrics(METRIC_INFO, ["json"], "training") == [
        "avg_step_time",
        "kernel_compute_time_group_6",
        "communication_overhead",
    ]
    assert auto_metrics(METRIC_INFO, ["json"], "Inference") == [
        "avg_step_time",
        "ttft",
        "kernel_compute_time_group_6",
        "communication_overhead",
    ]
    assert auto_metrics(METRIC_INFO, ["nsys", "json_tpu"], None) == [
        "avg_step_time",
        "comm_kernel_breakdown_tpu",
        "straggler",
    ]
    assert auto_metrics(METRIC_INFO, [], "training") == []
    assert six_digits(0.123456789) == 0.123457 and six_digits(float("nan")) is None and six_digits(-1.0) is None


def test_config_pairs_auto_lists_and_required_update(folders, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    out = tmp_path / "site"
    gpu, tpu = str(folders["gpu"]), str(folders["tpu"])
    cfg = write_config(
        tmp_path / "benchmark_config.json",
        [
            {"trace": gpu, "metrics": "auto", "required_update": False},
            {
                "trace": tpu,
                "metrics": ["comm_kernel_breakdown_tpu", "avg_step_time", "no_such_metric"],
                "required_update": True,
            },
        ],
    )
    # a stale site: the GPU row already has a value (a sentinel) for avg_step_time
    out.mkdir()
    (out / "benchmark_data.json").write_text(
        json.dumps(
            {
                "rows": [
                    {"trace": gpu, "metadata": {}, "metrics": {"avg_step_time": 42.0}},
                    {"trace": tpu, "metadata": {}, "metrics": {"comm_kernel_breakdown_tpu": 7.0}},
                ]
            }
        )
    )
    result = build_from_config(wh, out, cfg)
    rows = rows_of(out)
    assert list(rows) == [gpu, tpu]
    # auto on a json training card: avg_step_time and kernel_compute_time_group_6 (ttft is
    # for inference, the others for other trace types); avg_step_time reused (the pair and
    # the metric say no update), kernel_compute_time computed: 2 ranks x 1200 us
    # communication_overhead: a 0..1 ratio, as CCL-Bench's tool prints it (whatever unit
    # the config's label says): (340 + 440) / (340 + 1200 + 440 + 1200)
    assert rows[gpu]["metrics"] == {
        "avg_step_time": 42.0,
        "kernel_compute_time_group_6": 0.0024,
        "communication_overhead": float(f"{780 / 3180:.6g}"),
    }
    # the TPU pair says required_update: every listed metric computed, 6 digits, null for
    # the unknown name (with its reason)
    assert rows[tpu]["metrics"] == {"comm_kernel_breakdown_tpu": 1e-05, "avg_step_time": None, "no_such_metric": None}
    assert rows[tpu]["reasons"]["no_such_metric"] == "unknown metric no_such_metric"
    assert rows[gpu]["metadata"]["workload_name"] == "gpu_run"
    assert (result.reused, result.computed) == (1, 5)
    assert any("no_such_metric" in p for p in result.problems)
    data = json.loads((out / "benchmark_data.json").read_text())
    assert data["metric_info"] == METRIC_INFO and data["metric_categories"] == CATEGORIES
    assert data["all_metrics"] == sorted(
        [
            "avg_step_time",
            "kernel_compute_time_group_6",
            "communication_overhead",
            "comm_kernel_breakdown_tpu",
            "no_such_metric",
        ]
    )
    assert (out / "data.js").read_text().count("const BENCHMARK_DATA = ") == 1
    # OUT held a benchmark_data.json cclq did not write: only the two data files go there
    assert sorted(p.name for p in out.iterdir()) == ["benchmark_data.json", "data.js"]

    # metric_info says avg_step_time changed: recomputed for the GPU pair (1000 us step)
    info = {**METRIC_INFO, "avg_step_time": {**METRIC_INFO["avg_step_time"], "required_update": True}}
    write_config(cfg, [{"trace": gpu, "metrics": "auto", "required_update": False}], info)
    result = build_from_config(wh, out, cfg)
    assert rows_of(out)[gpu]["metrics"] == {
        "avg_step_time": 0.001,
        "kernel_compute_time_group_6": 0.0024,
        "communication_overhead": float(f"{780 / 3180:.6g}"),
    }
    assert (result.reused, result.computed) == (2, 1)


@pytest.mark.slow
def test_the_cli_and_write_config(folders, tmp_path):
    wh = tmp_path / "wh"
    assert invoke("ingest", str(folders["gpu"]), str(folders["tpu"]), "-w", str(wh)).returncode == 0
    written = tmp_path / "written_config.json"
    proc = invoke("board", str(tmp_path / "site1"), "-q", "--write-config", str(written), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(written.read_text())
    assert doc["pairs"] == [
        {"trace": str(folders["gpu"]), "metrics": "auto", "required_update": False},
        {"trace": str(folders["tpu"]), "metrics": "auto", "required_update": False},
    ]
    assert "json" in doc["metric_info"]["avg_step_time"]["trace_types"]
    # fed back, it gives one row a pair with every leaderboard metric
    proc = invoke("board", str(tmp_path / "site2"), "-q", "--config", str(written), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    rows = rows_of(tmp_path / "site2")
    assert set(rows) == {str(folders["gpu"]), str(folders["tpu"])}
    assert set(rows[str(folders["gpu"])]["metrics"]) == set(doc["metric_info"])
    assert rows[str(folders["gpu"])]["metrics"]["avg_step_time"] == 0.001
    # a config naming a folder that is not there: exit 1, the error named, the rest written
    bad = write_config(
        tmp_path / "bad.json",
        [
            {"trace": str(tmp_path / "missing"), "metrics": "auto"},
            {"trace": str(folders["gpu"]), "metrics": ["avg_step_time"]},
        ],
    )
    proc = invoke("board", str(tmp_path / "site3"), "-q", "--config", str(bad), "-w", str(wh))
    assert proc.returncode == 1
    assert "missing" in proc.stderr and "Traceback" not in proc.stderr
    assert rows_of(tmp_path / "site3")[str(folders["gpu"])]["metrics"] == {"avg_step_time": 0.001}


def test_an_upload_job_picks_the_configs_metrics(tmp_path):
    """`cclq serve --config`: an upload gets the config's auto choice for its card, or all
    of metric_info when the card names no trace types (as process_upload.py runs them
    all); without a config, cclq's leaderboard metrics with their metric_info."""
    from cclq.present.board.build import board_specs
    from cclq.present.serve.jobs import JobSettings, job_metrics

    cfg = write_config(tmp_path / "benchmark_config.json", [])
    settings = JobSettings(Warehouse(tmp_path / "wh"), tmp_path / "board", cfg)
    names, info = job_metrics(settings, ["json"], "training")
    assert names == ["avg_step_time", "kernel_compute_time_group_6", "communication_overhead"]
    assert info == {n: METRIC_INFO[n] for n in names}
    assert job_metrics(settings, [], None)[0] == list(METRIC_INFO)
    names, info = job_metrics(JobSettings(Warehouse(tmp_path / "wh"), tmp_path / "board", None), ["json"], None)
    assert names == [s.name for s in board_specs() if s.leaderboard] and set(info) == set(names)


# ------------------------------------------------------------------ the first run, from nothing
def _one_pair_config(path: Path, folder: Path) -> Path:
    return write_config(path, [{"trace": str(folder), "metrics": ["avg_step_time", "kernel_compute_time_group_6"]}])


@pytest.mark.slow
@pytest.mark.parametrize("warehouse", ["missing", "empty"])
def test_a_first_run_ingests_into_a_missing_or_empty_warehouse(tmp_path, warehouse):
    """docs/ccl-bench.md step 3 on a fresh checkout: no warehouse yet (or an empty folder),
    the pairs are ingested and the data written (the GPU folder's step is 1000 us, its
    compute kernels 1200 us a rank on 2 ranks)."""
    build_gpu(tmp_path / "traces" / "gpu_run", card=GPU_CARD)
    wh = tmp_path / "wh"
    if warehouse == "empty":
        wh.mkdir()
    cfg = _one_pair_config(tmp_path / "benchmark_config.json", tmp_path / "traces" / "gpu_run")
    proc = invoke("board", str(tmp_path / "out"), "-q", "--config", str(cfg), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    assert "no warehouse" not in proc.stderr
    assert rows_of(tmp_path / "out")[str(tmp_path / "traces" / "gpu_run")]["metrics"] == {
        "avg_step_time": 0.001,
        "kernel_compute_time_group_6": 0.0024,
    }
    assert Warehouse(wh).exists()


@pytest.mark.parametrize("with_config", [True, False])
def test_an_out_that_is_a_file_fails_before_any_work(tmp_path, with_config):
    """`cclq board FILE`: a usage error naming the file, before anything is ingested or
    computed (the warehouse is never made), not an internal error at the end."""
    build_gpu(tmp_path / "traces" / "gpu_run", card=GPU_CARD)
    out = tmp_path / "index.html"
    out.write_text("<html>not a folder</html>")
    wh = tmp_path / "wh"
    args = (
        ["--config", str(_one_pair_config(tmp_path / "c.json", tmp_path / "traces" / "gpu_run"))] if with_config else []
    )
    proc = invoke("board", str(out), "-q", *args, "-w", str(wh))
    assert proc.returncode == 2
    assert f"{out} is a file" in proc.stderr and "Traceback" not in proc.stderr and "bug" not in proc.stderr
    assert not wh.exists()
    assert out.read_text() == "<html>not a folder</html>"


@pytest.mark.slow
def test_only_the_data_files_go_into_a_folder_that_is_not_cclqs(tmp_path):
    """CCL-Bench's website/ (its own pages and files): `--config` writes benchmark_data.json
    and data.js there and nothing else; `--pages` asks for cclq's site too; a new folder
    is cclq's, and gets the site."""
    build_gpu(tmp_path / "traces" / "gpu_run", card=GPU_CARD)
    cfg = _one_pair_config(tmp_path / "c.json", tmp_path / "traces" / "gpu_run")
    website = tmp_path / "website"
    website.mkdir()
    for name in ("generate_data.py", "styles.css", "benchmark_config.json"):
        (website / name).write_text("CCL-Bench's own\n")
    wh = tmp_path / "wh"
    proc = invoke("board", str(website), "--config", str(cfg), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in website.iterdir()) == [
        "benchmark_config.json",
        "benchmark_data.json",
        "data.js",
        "generate_data.py",
        "styles.css",
    ]
    assert all((website / n).read_text() == "CCL-Bench's own\n" for n in ("generate_data.py", "styles.css"))
    assert "--pages" in proc.stderr  # says how to get the site there
    # without --config too: cclq's leaderboard data, and nothing else
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("mine\n")
    assert invoke("board", str(other), "-q", "-w", str(wh)).returncode == 0
    assert sorted(p.name for p in other.iterdir()) == ["README.md", "benchmark_data.json", "data.js"]
    # --pages: cclq's site as well; the folder is then a board, and stays one
    proc = invoke("board", str(website), "-q", "--pages", "--config", str(cfg), "-w", str(wh))
    assert proc.returncode == 0, proc.stderr
    assert {"index.html", "assets", "w", "data", ".cclq-board"} <= {p.name for p in website.iterdir()}
    fresh = tmp_path / "fresh_site"
    assert invoke("board", str(fresh), "-q", "--config", str(cfg), "-w", str(wh)).returncode == 0
    assert (fresh / "index.html").is_file() and (fresh / "benchmark_data.json").is_file()
