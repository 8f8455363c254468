"""CCL-Bench's generator sends its calls from a pool of 32 threads: the daemon serves them at
once (a thread per call, each with its own output), one daemon is started for all of them,
the sibling folders are ingested once, the metrics asked meanwhile are computed in batches,
and every answer is the one a call in its own process gives."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.daemon import _main, _paths

from cclq.compat.daemon import _dumps, _loads
from cclq.synth.kineto import generate_workload

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

METRICS = [
    "total_kernel_time",
    "avg_step_time",
    "communication_fraction",
    "mean_sm_coverage",
    "collective_vol_allreduce_gb",
    "dominant_kernel_concentration",
]


def test_a_pool_of_calls_on_a_fresh_warehouse(setup):  # noqa: F811
    tmp_path, env = setup
    generate_workload(tmp_path / "in" / "c", ranks=2, steps=2, layers=1, seed=3)
    work = [(w, m) for w in ("a", "b", "c") for m in METRICS]
    with ThreadPoolExecutor(16) as pool:
        warm = list(pool.map(lambda wm: _main(env, "--trace", str(tmp_path / "in" / wm[0]), "--metric", wm[1]), work))
    cold = [
        _main(
            env,
            "--trace",
            str(tmp_path / "in" / w),
            "--metric",
            m,
            "--warehouse",
            str(tmp_path / "cold" / f"{w}-{m}"),
            daemon_on=False,
        )
        for w, m in work
    ]
    for (w, m), got, want in zip(work, warm, cold):
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), (w, m, got.stderr)
        told = "".join(x for x in got.stderr.splitlines(keepends=True) if not x.startswith("cclq: note: traces are"))
        assert told.replace(str(tmp_path / "wh"), "W") == want.stderr.replace(
            str(tmp_path / "cold" / f"{w}-{m}"), "W"
        ), (w, m)
    log = _paths(tmp_path)["log"].read_text()
    assert sum(" serving " in line for line in log.splitlines()) == 1, log  # one daemon served them all
    assert log.count("folder(s) of") == 1  # the siblings ingested once
    batches = [line for line in log.splitlines() if "in one batch" in line]
    per_batch = [[name.split()[0] for name in line.split(": ", 2)[2].split(", ")] for line in batches]
    computed = [name for names in per_batch for name in names]
    assert set(METRICS) <= set(computed) and len(computed) == len(set(computed)), log  # each once
    assert len(batches) < len(METRICS)  # metrics asked at once share a batch
    # a first batch asked for several metrics at once computes CCL-Bench's website's too; on a
    # loaded machine the first call can be alone when its batch starts (then it is not a pool)
    first_asked = [name for name in per_batch[0] if name in METRICS]
    website = [name for name in per_batch[0] if name in ("ttft", "mfu")]
    assert (len(website) == 2) == (len(first_asked) >= 2), batches[0]


def test_calls_of_other_environments_wait_for_each_other(setup):  # noqa: F811
    """The working folder and CCLQ_* variables are the process's: calls of two settings are
    never mixed (each gets the answer of its own settings)."""
    tmp_path, env = setup
    folder = str(tmp_path / "in" / "a")
    first = _main(env, "--trace", folder, "--metric", "total_kernel_time")
    assert first.returncode == 0, first.stderr

    def ask(i: int) -> subprocess.CompletedProcess:
        variant = {**env, "CCLQ_MEMORY_LIMIT": "600MB" if i % 2 else "700MB"}
        return subprocess.run(
            [sys.executable, "-m", "cclq.main", "--trace", "a", "--metric", "avg_step_time"],
            capture_output=True,
            text=True,
            env=variant,
            cwd=tmp_path / "in",
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    assert {(a.returncode, a.stdout) for a in answers} == {(0, answers[0].stdout)}, [a.stderr for a in answers]
    assert float(answers[0].stdout) > 0


def test_the_clients_json_is_the_json_modules():
    request = {
        "argv": ["--trace", 'a "b" é\n\x00', "--metric", "m"],
        "cwd": "/x",
        "env": {"CCLQ_A": "1"},
        "code": "v",
        "ping": True,
        "n": 3,
    }
    assert json.loads(_dumps(request)) == request
    reply = {"stdout": "1.5\n", "stderr": "cclq: ü\n", "rc": 0, "x": [1, 2.5, None, False]}
    assert _loads((" " + json.dumps(reply)).encode()) == reply
    for bad in (b"{", b"[] []", b"NaN", b"\xff", b'{"a": Infinity}'):
        try:
            _loads(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
