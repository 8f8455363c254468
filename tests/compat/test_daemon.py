"""The warm daemon behind `python -m cclq.main`: same answers, and no answer ever depends
on it (a dead, outdated or absent daemon falls back to the work in the caller)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.daemon import _main, _paths

from cclq.compat import daemon

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

CALLS = [
    ("a", "total_kernel_time"),
    ("b", "avg_step_time"),
    ("a", "communication_fraction"),
    ("b", "ttft"),
    ("a", "no_such_metric"),
]


def test_the_daemon_answers_as_the_process_itself_would(setup):
    tmp_path, env = setup
    here = [
        _main(
            env,
            "--trace",
            str(tmp_path / "in" / w),
            "--metric",
            m,
            "--warehouse",
            str(tmp_path / "wh_here"),
            daemon_on=False,
        )
        for w, m in CALLS
    ]
    warm = [_main(env, "--trace", str(tmp_path / "in" / w), "--metric", m) for w, m in CALLS]
    assert _paths(tmp_path)["sock"].exists()  # a daemon served them
    # the call that started it says so, once, on stderr (and how to stop it)
    notes = [d.stderr for d in warm if "cclq: note: traces are ingested into the warehouse" in d.stderr]
    assert len(notes) == 1 and "`cclq daemon stop`" in notes[0], [d.stderr for d in warm]
    assert f"the warehouse {tmp_path / 'wh'} (delete it" in notes[0] and "CCLQ_DAEMON_IDLE_S" in notes[0]
    for (w, m), h, d in zip(CALLS, here, warm):
        assert (d.returncode, d.stdout) == (h.returncode, h.stdout), (w, m)
        told = "".join(x for x in d.stderr.splitlines(keepends=True) if not x.startswith("cclq: note: traces are"))
        assert told.replace(str(tmp_path / "wh"), "W") == h.stderr.replace(str(tmp_path / "wh_here"), "W")
    stop = subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", "daemon", "stop", "-w", str(tmp_path / "wh")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert stop.returncode == 0 and stop.stderr.strip() == f"stopped the daemon of {tmp_path / 'wh'}"
    assert not daemon._locked(_paths(tmp_path)["lock"])
    assert here[0].stdout.strip() and here[0].stdout.strip() != "nan"
    assert here[-1].returncode == 2 and "no_such_metric" in here[-1].stderr


def test_a_warm_call_never_imports_duckdb_and_uses_the_callers_folder(setup):
    tmp_path, env = setup
    first = _main(env, "--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time")
    assert first.returncode == 0, first.stderr
    probe = (
        "import sys, runpy\nsys.argv = ['cclq.main', '--trace', 'in/a', '--metric', 'total_kernel_time']\n"
        "from cclq.compat.main import main\nrc = main()\n"
        "print('duckdb' in sys.modules, 'pyarrow' in sys.modules, file=sys.stderr)\n"
        # nor argparse, typing or pathlib: a warm call's time is mostly its client's start
        "print(sorted({'argparse', 'typing', 'pathlib', 'subprocess'} & set(sys.modules)), file=sys.stderr)\n"
        "sys.exit(rc)"
    )
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == first.stdout
    assert warm.stderr.strip().splitlines() == ["False False", "[]"]


def test_a_killed_daemon_is_replaced_and_an_outdated_one_leaves(setup):
    tmp_path, env = setup
    args = ("--trace", str(tmp_path / "in" / "b"), "--metric", "total_kernel_time")
    first = _main(env, *args)
    paths = _paths(tmp_path)
    pid = int(paths["log"].read_text().split()[2])
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert paths["sock"].exists()  # stale: nobody listens
    again = _main(env, *args)
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
    new_pid = int(paths["log"].read_text().splitlines()[-1].split()[2])
    assert new_pid != pid
    # a call from other code (an upgrade, an edited SQL file) makes it leave, not answer
    reply = daemon._ask(
        paths["sock"], json.dumps({"argv": list(args), "cwd": str(tmp_path), "env": {}, "code": "another version"})
    )
    assert reply == {"restart": True}
    deadline = time.time() + 10
    while daemon._locked(paths["lock"]) and time.time() < deadline:
        time.sleep(0.05)
    assert not daemon._locked(paths["lock"]) and not paths["sock"].exists()
    third = _main(env, *args)
    assert (third.returncode, third.stdout) == (first.returncode, first.stdout)


def test_off_means_no_daemon(setup):
    tmp_path, env = setup
    result = _main(env, "--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time", daemon_on=False)
    assert result.returncode == 0
    assert not list((tmp_path / "tmp").rglob("*.sock"))


def test_a_home_others_can_open_is_not_used(setup):
    tmp_path, env = setup
    home = tmp_path / "tmp" / f"cclq-{os.getuid()}"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    result = _main(env, "--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time")
    assert result.returncode == 0 and result.stdout.strip() not in ("", "nan")
    assert not list(home.iterdir())  # answered in the caller's own process
