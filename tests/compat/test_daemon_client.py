"""The daemon's client and server never wait forever on each other, no request takes the
daemon down, and a caller that names its interpreter by a relative path is recognised.
Before: no timeout (a stopped daemon hung every `python -m cclq.main`), a request ``[]``
killed the daemon, and `../venv/bin/python -m cclq.main` never matched the fingerprint,
so every call started daemons and then ran itself (2.4-5.2 s instead of 0.25 s)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.daemon import _main, _paths

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def _daemon_pid(paths: dict[str, Path]) -> int:
    """The pid of the daemon holding the lock (from its log's last serving line)."""
    lines = [ln for ln in paths["log"].read_text().splitlines() if ln.startswith("cclq daemon ")]
    return int(lines[-1].split()[2])


def _raw(sock: Path, payload: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
        return data


def test_a_stopped_daemon_is_timed_out_and_the_call_runs_here(setup):  # noqa: F811
    tmp_path, env = setup
    args = ("--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time")
    first = _main(env, *args)
    assert first.returncode == 0, first.stderr
    paths = _paths(tmp_path)
    pid = _daemon_pid(paths)
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "cclq.main", *args],
            capture_output=True,
            text=True,
            env={**env, "CCLQ_DAEMON_ACK_S": "1"},
            timeout=60,
        )
        seconds = time.monotonic() - start
        assert done.returncode == 0 and done.stdout == first.stdout, done.stderr
        assert seconds < 20
        log = paths["log"].read_text()
        assert log.count("cclq daemon ") == 1  # no other daemon was started
    finally:
        os.kill(pid, signal.SIGCONT)


def test_malformed_and_slow_requests_do_not_take_the_daemon_down(setup):  # noqa: F811
    tmp_path, env = setup
    args = ("--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time")
    first = _main(env, *args)
    paths = _paths(tmp_path)
    pid = _daemon_pid(paths)
    for payload in (
        b"[]",
        b"null",
        b"7",
        b'"x"',
        b'{"argv": "ls"}',
        b'{"argv": [1], "cwd": "/", "env": {}, "code": "x"}',
        b'{"argv": [], "cwd": "/", "env": {"PATH": "/evil"}, "code": "x"}',
        b"{",
        b"\xff\xfe",
    ):
        reply = _raw(paths["sock"], payload)
        assert "error" in json.loads(reply), (payload, reply)
    # a client that connects and never sends: the daemon gives up on it and serves the next
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(str(paths["sock"]))
    try:
        start = time.monotonic()
        again = _main(env, *args)
        assert again.returncode == 0 and again.stdout == first.stdout
        assert time.monotonic() - start < 30
    finally:
        idle.close()
    assert _daemon_pid(paths) == pid and os.path.exists(f"/proc/{pid}")  # the same daemon, alive


def test_a_relative_interpreter_path_matches_the_daemon(setup):  # noqa: F811
    tmp_path, env = setup
    here = tmp_path / "deep" / "er"
    here.mkdir(parents=True)
    python = os.path.relpath(sys.executable, here)
    assert python.startswith("..")
    args = ["-m", "cclq.main", "--trace", str(tmp_path / "in" / "a"), "--metric", "total_kernel_time"]
    runs = [
        subprocess.run([python, *args], capture_output=True, text=True, cwd=here, env=env, timeout=120)
        for _ in range(3)
    ]
    assert all(r.returncode == 0 and r.stdout == runs[0].stdout for r in runs), runs[0].stderr
    paths = _paths(tmp_path)
    assert paths["log"].read_text().count("cclq daemon ") == 1  # one daemon served all three
