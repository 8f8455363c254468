"""A warm process behind ``python -m cclq.main``, CCL-Bench's one-process-per-number call.

CCL-Bench's website generator runs ``python tools/main.py --trace D --metric M`` once per
(trace, metric). A cclq process pays ~0.3 s of imports (DuckDB, pyarrow) and connection
set-up before any work, which made that loop no faster than CCL-Bench's own scripts.
So the first call starts a daemon for its warehouse and hands it the call; every later
call is a standard-library client (``cclq.main`` imports nothing heavy) that sends its
arguments over a Unix socket and prints the answer, and the daemon, with everything
already imported, only does the work (a cached result is a file read).

The daemon is a convenience, never a dependency: whatever goes wrong with it (no socket,
a refused connection, a daemon that dies mid-call) the client runs the call in its own
process, as before, and the answer is the same (``tests/compat/test_daemon.py``). Ingest and
the result cache make a repeated call safe. The daemon:

* serves one warehouse, one call at a time, in the caller's working folder and with the
  caller's ``CCLQ_*`` environment; it reads the warehouse's current snapshot per call;
* exits after ``CCLQ_DAEMON_IDLE_S`` seconds without a call (default 600), and when
  cclq's code or SQL changed since it started (it checks its files at each call), or a
  call comes from another cclq (interpreter, package folder or version);
* lives in ``$TMPDIR/cclq-<uid>/<hash of the warehouse path>.{sock,lock,log}``, a
  folder only its user can open (the socket path must stay under ~100 bytes, which a
  warehouse path may not).

``CCLQ_DAEMON=0`` turns it off (the test suite does, except here);
``python -m cclq.compat.daemon --stop [--warehouse W]`` stops one.

Neither side waits forever on the other. The daemon acknowledges a call (one space, JSON
whitespace) as it starts it; a client that gets no acknowledgement within
``CCLQ_DAEMON_ACK_S`` (2 s: a stopped daemon, or one busy with another call) or no
answer within ``CCLQ_DAEMON_TIMEOUT_S`` (600 s) runs the call itself and starts no
daemon. The daemon reads a request for at most 5 s, answers anything that is not a
well-formed request with an error, and no request can stop it but ``stop``. Paths in
the fingerprint (the interpreter, the package) and the warehouse's are normalised, so
``../venv/bin/python -m cclq.main`` is the same caller as ``/abs/venv/bin/python``.

Standard library only at import: this module is the client too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import socket
import sys
import tempfile
import time

# Not typing's, nor pathlib at run time: the client's start is most of a warm call, and
# those two imports alone were ~30 ms of it (mypy reads the name as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

ENABLE_ENV = "CCLQ_DAEMON"
IDLE_ENV = "CCLQ_DAEMON_IDLE_S"
ACK_ENV = "CCLQ_DAEMON_ACK_S"
TIMEOUT_ENV = "CCLQ_DAEMON_TIMEOUT_S"
DEFAULT_IDLE_S = 600.0
START_TIMEOUT_S = 30.0
DEFAULT_ACK_S = 2.0  # a daemon that is there starts a call in milliseconds
DEFAULT_TIMEOUT_S = 600.0
REQUEST_READ_S = 5.0  # the daemon's patience with a client sending its request
ACK = b" "


class _Unresponsive:
    """A daemon that accepted the connection but did not serve in time."""


UNRESPONSIVE = _Unresponsive()


def _seconds(env: str, default: float) -> float:
    try:
        value = float(os.environ.get(env, default))
    except ValueError:
        return default
    return value if value > 0 else default


def _norm(path: str | os.PathLike[str]) -> str:
    """An absolute path with ``..`` and ``.`` resolved, links kept (a venv's python is a link)."""
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- places
# A Unix socket's path holds at most 107 bytes (Linux): a long $TMPDIR cannot hold ours
_SOCKET_PATH_MAX = 100


def _home() -> str | None:
    """``$TMPDIR/cclq-<uid>`` (``/tmp/cclq-<uid>`` when that path is too long for a
    socket), made private; None if it exists but another user owns it or others can
    open it (then no daemon: a socket there could be someone else's)."""
    home = os.path.join(tempfile.gettempdir(), f"cclq-{os.getuid()}")
    if len(os.fsencode(home)) + 26 > _SOCKET_PATH_MAX:  # "/<20 hex>.sock" and a margin
        home = os.path.join("/tmp", f"cclq-{os.getuid()}")
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(home, 0o700)
        st = os.stat(home)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return home


def _places(wh_root: str | os.PathLike[str]) -> dict[str, str] | None:
    """The daemon's socket, lock and log for the warehouse, as text (the client's way)."""
    home = _home()
    if home is None:
        return None
    stem = hashlib.sha256(_norm(wh_root).encode()).hexdigest()[:20]
    return {kind: os.path.join(home, f"{stem}.{kind}") for kind in ("sock", "lock", "log")}


def _paths(wh_root: str | os.PathLike[str]) -> dict[str, Path] | None:
    """``_places`` as Paths."""
    from pathlib import Path

    places = _places(wh_root)
    return None if places is None else {kind: Path(p) for kind, p in places.items()}


def warehouse_root(option: str | None) -> str:
    """The warehouse a call names (``cclq.locations.warehouse_path``)."""
    from cclq.locations import warehouse_path

    return warehouse_path(option)


def caller_stamp() -> str:
    """Which cclq a call comes from: its version, interpreter and package folder. The
    daemon serves only calls of its own (``installed_code_stamp`` then says whether
    those files changed since it started)."""
    from cclq.version import __version__

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cclq/, from cclq/compat/
    return f"{__version__}\0{_norm(sys.executable)}\0{_norm(package)}"


def installed_code_stamp() -> str:
    """cclq's Python files and SQL (path, size, mtime): a daemon started before an edit
    or an upgrade must not answer with the old code. The daemon computes it per call (the
    client only says which cclq it is, ``caller_stamp``: walking the files was ~20 ms of
    the client's start)."""
    from cclq.locations import package_dir, sql_root
    from cclq.version import __version__

    h = hashlib.sha256(f"{__version__}\0{_norm(sys.executable)}".encode())
    for top, suffix in ((package_dir(), ".py"), (sql_root(), ".sql")):
        stack = [_norm(top)]
        entries = []
        while stack:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__":
                            stack.append(e.path)
                    elif e.name.endswith(suffix):
                        st = e.stat()
                        entries.append(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}")
        for entry in sorted(entries):
            h.update(entry.encode())
            h.update(b"\n")
    return h.hexdigest()


def _caller_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("CCLQ_")}


# ----------------------------------------------------------------------------- client
def call(argv: list[str], wh_root: str | os.PathLike[str]) -> int | None:
    """Runs ``python -m cclq.main argv`` in the warehouse's daemon, starting it when none
    runs, and prints what it printed. Its exit status, or None when no daemon could
    serve the call (the caller then runs it itself)."""
    paths = _places(wh_root)
    if paths is None:
        return None
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": _caller_env(), "code": caller_stamp()})
    started: subprocess.Popen | None = None
    for _ in range(3):
        reply = _ask(paths["sock"], request, _seconds(ACK_ENV, DEFAULT_ACK_S), _seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        if isinstance(reply, _Unresponsive):  # UNRESPONSIVE, its one instance
            if started is not None:  # this call started it (busy with its first call): it stays
                _tell_once(paths, started.pid, wh_root)
            return None  # there, but not serving: run here, and start no other daemon
        if reply is None or reply.get("restart"):
            if reply is not None:
                _wait_gone(paths["lock"])  # an outdated daemon: it exits, a new one starts
            started = _start(wh_root, paths)
            if started is None:
                return None
            continue
        if not isinstance(reply.get("stdout"), str) or not isinstance(reply.get("stderr"), str) \
                or not isinstance(reply.get("rc"), int):
            return None  # not an answer to a call (an old daemon's error reply): run here
        sys.stdout.write(reply["stdout"])
        sys.stderr.write(reply["stderr"])
        if started is not None:
            _tell_once(paths, started.pid, wh_root)
        sys.stdout.flush()
        sys.stderr.flush()
        return int(reply["rc"])
    return None


def _tell_once(paths: dict[str, str], pid: int, wh_root: str | os.PathLike[str]) -> None:
    """The first daemon a user's calls start for a warehouse says so on stderr, once per
    warehouse (a marker file beside its socket; the note names the warehouse): a process
    that stays after the call, and a warehouse folder the call wrote (``./.cclq/`` by
    default), should not be a surprise."""
    marker = paths["log"][: -len(".log")] + ".told"
    if os.path.exists(marker):
        return
    idle = os.environ.get(IDLE_ENV, str(int(DEFAULT_IDLE_S)))
    sys.stderr.write(f"cclq: note: traces are ingested into the warehouse {wh_root} (delete it to start over); "
                     f"a background process (pid {pid}) keeps it open so that the next "
                     f"calls answer fast; it exits after {idle} s without a call ({IDLE_ENV}). Stop it with "
                     f"`cclq daemon stop`; {ENABLE_ENV}=0 runs every call in its own process. (Said once.)\n")
    try:
        open(marker, "a").close()
    except OSError:
        pass


def _ask(sock_path: str | os.PathLike[str], request: str, ack_s: float = DEFAULT_ACK_S,
         reply_s: float = DEFAULT_TIMEOUT_S) -> dict | _Unresponsive | None:
    """One request and its reply; None if no daemon answered (none runs, or it died),
    ``UNRESPONSIVE`` if one took the connection but did not start the request within
    ``ack_s`` seconds, or did not finish it within ``reply_s``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(ack_s)
            s.connect(str(sock_path))
            s.sendall(request.encode() + b"\n")
            s.shutdown(socket.SHUT_WR)
            data = bytearray()
            first = s.recv(1 << 16)  # the acknowledgement, or the whole of a short reply
            data += first
            s.settimeout(reply_s)
            deadline = time.monotonic() + reply_s
            while first and (chunk := s.recv(1 << 16)):
                data += chunk
                if time.monotonic() > deadline:
                    return UNRESPONSIVE
        reply = json.loads(data) if data.strip() else None
        return reply if isinstance(reply, dict) else None
    except TimeoutError:
        return UNRESPONSIVE
    except (OSError, ValueError):
        return None


def _start(wh_root: str | os.PathLike[str], paths: dict[str, str]) -> subprocess.Popen | None:
    """Starts a daemon (detached, in its own session) and waits for its socket."""
    import subprocess

    try:
        log = open(paths["log"], "ab")
    except OSError:
        return None
    with log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cclq.compat.daemon_process", "--warehouse", str(wh_root)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("CCLQ_") or k == IDLE_ENV},
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = _ask(paths["sock"], json.dumps({"ping": True}), DEFAULT_ACK_S, DEFAULT_ACK_S)
        if isinstance(answer, dict):
            return proc
        if answer is UNRESPONSIVE:
            return None
        if proc.poll() is not None and not _locked(paths["lock"]):
            return None  # it died without serving, and no other daemon holds the warehouse
        time.sleep(0.02)
    return None


def _locked(lock_path: str | os.PathLike[str]) -> bool:
    try:
        with open(lock_path, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def _wait_gone(lock_path: str | os.PathLike[str], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _locked(lock_path) and time.monotonic() < deadline:
        time.sleep(0.02)


def stop(wh_root: str | os.PathLike[str]) -> bool:
    """Asks the warehouse's daemon to exit; whether one was running."""
    paths = _paths(wh_root)
    if paths is None:
        return False
    stopped = isinstance(_ask(paths["sock"], json.dumps({"stop": True}), DEFAULT_ACK_S, DEFAULT_ACK_S), dict)
    if stopped:
        _wait_gone(paths["lock"])
    return stopped


# ----------------------------------------------------------------------------- server
def serve_calls(wh_root: Path, run: Callable[[list[str]], int], idle_s: float) -> None:
    """Answers calls until idle for ``idle_s`` or asked to stop. One daemon per warehouse:
    the lock file decides, and a second one exits at once."""
    paths = _paths(wh_root)
    if paths is None:
        return
    lock = open(paths["lock"], "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    code = caller_stamp()
    files = installed_code_stamp()
    sock_path = paths["sock"]
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()  # a dead daemon's; the lock says no live one has it
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(16)
    server.settimeout(idle_s)
    print(f"cclq daemon {os.getpid()} serving {wh_root} on {sock_path}", file=sys.stderr, flush=True)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                break
            with conn:
                try:
                    if not _handle(conn, run, code, files):
                        break
                except Exception as e:  # noqa: BLE001 - no request may take the daemon down
                    print(f"cclq daemon: request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        server.close()
        lock.close()


def _valid_call(request: object) -> str | None:
    """What is wrong with a call request, or None: argv a list of text, cwd text, env a
    mapping of text to text, code text."""
    if not isinstance(request, dict):
        return "a request is a JSON object"
    argv, env = request.get("argv"), request.get("env")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return "argv must be a list of strings"
    if not isinstance(request.get("cwd"), str) or not isinstance(request.get("code"), str):
        return "cwd and code must be strings"
    if not isinstance(env, dict) or not all(isinstance(k, str) and k.startswith("CCLQ_") and isinstance(v, str)
                                            for k, v in env.items()):
        return "env must map CCLQ_* names to strings"
    return None


def _read_request(conn: socket.socket) -> bytes | None:
    """The request, read within ``REQUEST_READ_S`` (and at most 16 MiB); None if the
    client did not send it in time."""
    conn.settimeout(REQUEST_READ_S)
    deadline = time.monotonic() + REQUEST_READ_S
    data = bytearray()
    try:
        while chunk := conn.recv(1 << 16):
            data += chunk
            if time.monotonic() > deadline or len(data) > 16 << 20:
                return None
    except (TimeoutError, OSError):
        return None
    return bytes(data)


def _handle(conn: socket.socket, run: Callable[[list[str]], int], code: str, files: str) -> bool:
    """Serves one request; False when the daemon should exit after it."""
    data = _read_request(conn)
    if data is None:
        return True
    try:
        request = json.loads(data)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"error": "a request is a JSON object"}).encode())
        return True
    if request.get("ping"):
        conn.sendall(b"{}")
        return True
    if request.get("stop"):
        conn.sendall(b"{}")
        return False
    problem = _valid_call(request)
    if problem is not None:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"error": problem}).encode())
        return True
    # a call from another cclq, or cclq's files changed since the daemon started (an edit,
    # an upgrade in place): the daemon leaves, and the caller starts a new one
    if request.get("code") != code or installed_code_stamp() != files:
        conn.sendall(json.dumps({"restart": True}).encode())
        return False
    conn.settimeout(None)
    try:
        conn.sendall(ACK)  # the call starts: the client now waits for its answer
    except OSError:
        return True
    out, err = io.StringIO(), io.StringIO()
    saved_env = dict(os.environ)
    try:
        os.chdir(request["cwd"])
        for key in [k for k in os.environ if k.startswith("CCLQ_")]:
            del os.environ[key]
        os.environ.update(request["env"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = run(list(request["argv"]))
            except SystemExit as e:  # argparse: --help, a bad option
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 (the call fails, the daemon goes on)
                import traceback

                traceback.print_exc()
                rc = 1
    except OSError as e:  # the caller's folder is gone
        err.write(f"cclq: error: {e}\n")
        rc = 2
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    reply = json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue(), "rc": rc})
    with contextlib.suppress(OSError):  # the caller went away
        conn.sendall(reply.encode())
    return True
