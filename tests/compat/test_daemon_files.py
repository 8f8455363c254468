"""The daemon's own files (issue 39): its folder is checked with ``lstat`` (a symlink named
``cclq-<uid>`` is not our folder, wherever it leads), and its socket replaces a dead
daemon's in one rename, never by removing it first."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from cclq.compat import daemon
from cclq.compat.daemon_server import bind_socket


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch):
    """A temporary folder of the test's own, short enough for a socket path, as $TMPDIR."""
    folder = Path(tempfile.mkdtemp(prefix="cq", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    for path in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        path.unlink() if path.is_symlink() or not path.is_dir() else path.rmdir()
    folder.rmdir()


def test_a_home_that_is_a_symlink_is_not_used(short_tmp: Path):
    """A symlink to a private folder of ours passes ``stat`` (it follows the link: our
    uid, mode 0700) but not ``lstat``: then no daemon, the call runs in its own process."""
    target = short_tmp / "elsewhere"
    target.mkdir(mode=0o700)
    home = short_tmp / f"cclq-{os.getuid()}"
    home.symlink_to(target)
    assert daemon.daemon_paths("/some/warehouse") is None
    home.unlink()
    paths = daemon.daemon_paths("/some/warehouse")  # a folder of its own is used
    assert paths is not None and paths["sock"].parent == home and home.is_dir() and not home.is_symlink()


def test_the_socket_replaces_a_dead_daemons_in_one_rename(short_tmp: Path, monkeypatch: pytest.MonkeyPatch):
    paths = daemon.daemon_paths("/some/warehouse")
    assert paths is not None
    sock_path = paths["sock"]
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))  # a killed daemon's socket file: still there, nobody listening
    dead.close()
    seen: list[tuple[str, bool]] = []
    bind = socket.socket.bind

    def watched_bind(self: socket.socket, address: str) -> None:
        seen.append((address, sock_path.exists()))
        bind(self, address)

    monkeypatch.setattr(socket.socket, "bind", watched_bind)
    server = bind_socket(sock_path)
    monkeypatch.undo()
    try:
        # bound under another name while the dead daemon's file was still in place
        assert [(Path(a).parent, a != str(sock_path), there) for a, there in seen] == [(sock_path.parent, True, True)]
        assert sorted(p.name for p in sock_path.parent.iterdir()) == [sock_path.name]  # no scratch name left
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(sock_path))
        conn, _ = server.accept()
        client.sendall(b"ping")
        assert conn.recv(4) == b"ping"
        conn.close()
        client.close()
    finally:
        server.close()
