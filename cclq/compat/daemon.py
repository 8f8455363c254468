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

import _socket
import fcntl
import os
import sys
import time
from stat import S_ISDIR  # imported by os already: costs nothing at start

# Not typing's, nor pathlib at run time: the client's start is most of a warm call, and
# those two imports alone were ~30 ms of it (mypy reads the name as typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
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


# ----------------------------------------------------------------------------- JSON
# The request and the reply are JSON (the server reads them with the json module), written
# and read here with the json module's own C functions: ``import json`` imports re and
# enum, ~20 ms of a warm call's ~60 ms start.


def _dumps(obj: object) -> str:
    """JSON of the request: objects, arrays, strings, booleans and integers."""
    from _json import encode_basestring_ascii as text

    if isinstance(obj, str):
        return str(text(obj))
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(f"{text(str(k))}:{_dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_dumps(v) for v in obj) + "]"
    raise TypeError(f"not part of a daemon request: {type(obj).__name__}")


class _Decoding:
    """What the json module's C scanner asks of its decoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"{name} is not JSON")


def _loads(data: bytes) -> object:
    """A reply as the json module reads it; ValueError when it is not one JSON value."""
    from _json import make_scanner

    text = data.decode("utf-8").strip()  # UnicodeDecodeError is a ValueError
    try:
        value, end = make_scanner(_Decoding())(text, 0)  # type: ignore[arg-type]  # the decoder it reads
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


class _Unresponsive:
    """A daemon that accepted the connection but did not serve in time."""


UNRESPONSIVE = _Unresponsive()


def _seconds(env: str, default: float) -> float:
    try:
        value = float(os.environ.get(env, default))
    except ValueError:
        return default
    return value if value > 0 else default


def norm_path(path: str | os.PathLike[str]) -> str:
    """An absolute path with ``..`` and ``.`` resolved, links kept (a venv's python is a link)."""
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- places
# A Unix socket's path holds at most 107 bytes (Linux): a long $TMPDIR cannot hold ours
_SOCKET_PATH_MAX = 100


def _tmpdir() -> str:
    """The temporary folder as ``tempfile.gettempdir`` finds it ($TMPDIR, $TEMP, $TMP, else
    /tmp), without importing tempfile (with its imports, ~30 ms of a warm call's start)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value and os.path.isdir(value) and os.access(value, os.W_OK | os.X_OK):
            return os.path.abspath(value)
    return "/tmp"


def _sha256_hex(text: str) -> str:
    """SHA-256 without hashlib's OpenSSL import where the interpreter has its own."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]  # Python <= 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]  # Python >= 3.12
        except ImportError:
            from hashlib import sha256
    return sha256(text.encode()).hexdigest()


def _home() -> str | None:
    """``$TMPDIR/cclq-<uid>`` (``/tmp/cclq-<uid>`` when that path is too long for a
    socket), made private; None if it exists but is not a folder of its own (a symlink,
    checked with ``lstat``: it could lead anywhere another user chose), another user owns
    it or others can open it (then no daemon: a socket there could be someone else's)."""
    home = os.path.join(_tmpdir(), f"cclq-{os.getuid()}")
    if len(os.fsencode(home)) + 26 > _SOCKET_PATH_MAX:  # "/<20 hex>.sock" and a margin
        home = os.path.join("/tmp", f"cclq-{os.getuid()}")
    try:
        try:
            os.mkdir(home, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(home)  # not stat: a symlink named cclq-<uid> is not our folder
    except OSError:
        return None
    if not S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return home


def _places(wh_root: str | os.PathLike[str]) -> dict[str, str] | None:
    """The daemon's socket, lock and log for the warehouse, as text (the client's way)."""
    home = _home()
    if home is None:
        return None
    stem = _sha256_hex(norm_path(wh_root))[:20]
    return {kind: os.path.join(home, f"{stem}.{kind}") for kind in ("sock", "lock", "log", "start")}


def daemon_paths(wh_root: str | os.PathLike[str]) -> dict[str, Path] | None:
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
    daemon serves only calls of its own (``daemon_server.installed_code_stamp`` then says whether
    those files changed since it started)."""
    from cclq.version import __version__

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cclq/, from cclq/compat/
    return f"{__version__}\0{norm_path(sys.executable)}\0{norm_path(package)}"


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
    request = _dumps({"argv": argv, "cwd": os.getcwd(), "env": _caller_env(), "code": caller_stamp()})
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
            up, proc = _start(wh_root, paths)
            if not up:
                return None
            started = proc or started  # None: another call started it meanwhile
            continue
        if (
            not isinstance(reply.get("stdout"), str)
            or not isinstance(reply.get("stderr"), str)
            or not isinstance(reply.get("rc"), int)
        ):
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
    sys.stderr.write(
        f"cclq: note: traces are ingested into the warehouse {wh_root} (delete it to start over); "
        f"a background process (pid {pid}) keeps it open so that the next "
        f"calls answer fast; it exits after {idle} s without a call ({IDLE_ENV}). Stop it with "
        f"`cclq daemon stop`; {ENABLE_ENV}=0 runs every call in its own process. (Said once.)\n"
    )
    try:
        open(marker, "a").close()
    except OSError:
        pass


def _ask(
    sock_path: str | os.PathLike[str], request: str, ack_s: float = DEFAULT_ACK_S, reply_s: float = DEFAULT_TIMEOUT_S
) -> dict | _Unresponsive | None:
    """One request and its reply; None if no daemon answered (none runs, or it died),
    ``UNRESPONSIVE`` if one took the connection but did not start the request within
    ``ack_s`` seconds, or did not finish it within ``reply_s``."""
    try:
        # _socket, not socket: socket.py's imports (enum, selectors) were ~10 ms of a call
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(ack_s)
            s.connect(str(sock_path))
            s.sendall(request.encode() + b"\n")
            s.shutdown(_socket.SHUT_WR)
            data = bytearray()
            first = s.recv(1 << 16)  # the acknowledgement, or the whole of a short reply
            data += first
            s.settimeout(reply_s)
            deadline = time.monotonic() + reply_s
            while first and (chunk := s.recv(1 << 16)):
                data += chunk
                if time.monotonic() > deadline:
                    return UNRESPONSIVE
        finally:
            s.close()
        reply = _loads(bytes(data)) if data.strip() else None
        return reply if isinstance(reply, dict) else None
    except TimeoutError:
        return UNRESPONSIVE
    except (OSError, ValueError):
        return None


def _start(wh_root: str | os.PathLike[str], paths: dict[str, str]) -> tuple[bool, subprocess.Popen | None]:
    """Starts a daemon (detached, in its own session) and waits for its socket: (whether
    one serves now, the process this call started). Callers that find no daemon at once
    (a generator's 32 threads on a fresh warehouse) take turns on the start lock: the
    first starts it, the others find it serving and start none (each start is a process
    that imports cclq only to find the warehouse's lock taken)."""
    ping = _dumps({"ping": True})
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        gate = open(paths["start"], "a")
    except OSError:
        return False, None
    with gate:
        while True:
            try:
                fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False, None
                time.sleep(0.02)
        try:
            if isinstance(_ask(paths["sock"], ping, DEFAULT_ACK_S, DEFAULT_ACK_S), dict):
                return True, None  # started by another call while this one waited
            import subprocess

            try:
                log = open(paths["log"], "ab")
            except OSError:
                return False, None
            with log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "cclq.compat.daemon_process", "--warehouse", str(wh_root)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    close_fds=True,
                    env={k: v for k, v in os.environ.items() if not k.startswith("CCLQ_") or k == IDLE_ENV},
                )
            while time.monotonic() < deadline:
                answer = _ask(paths["sock"], ping, DEFAULT_ACK_S, DEFAULT_ACK_S)
                if isinstance(answer, dict):
                    return True, proc
                if answer is UNRESPONSIVE:
                    return False, None
                if proc.poll() is not None and not _locked(paths["lock"]):
                    return False, None  # it died without serving, and no other daemon holds the warehouse
                time.sleep(0.02)
            return False, None
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)


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
    paths = daemon_paths(wh_root)
    if paths is None:
        return False
    stopped = isinstance(_ask(paths["sock"], _dumps({"stop": True}), DEFAULT_ACK_S, DEFAULT_ACK_S), dict)
    if stopped:
        _wait_gone(paths["lock"])
    return stopped
