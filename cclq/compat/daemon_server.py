"""The daemon's server side: the accept loop, calls run at once in threads, each with its
own output (``cclq.compat.daemon`` is the client, and the places both use).

Standard library only, like the client: it serves whatever handler it is given
(``cclq.compat.daemon_process`` gives it ``cclq.compat.warm.WarmCalls``).
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
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cclq.compat.daemon import ACK, DEFAULT_TIMEOUT_S, REQUEST_READ_S, caller_stamp, daemon_paths, norm_path


def installed_code_stamp() -> str:
    """cclq's Python files and SQL (path, size, mtime): a daemon started before an edit
    or an upgrade must not answer with the old code. The daemon computes it per call (the
    client only says which cclq it is, ``caller_stamp``: walking the files was ~20 ms of
    the client's start)."""
    from cclq.locations import package_dir, sql_root
    from cclq.version import __version__

    h = hashlib.sha256(f"{__version__}\0{norm_path(sys.executable)}".encode())
    for top, suffix in ((package_dir(), ".py"), (sql_root(), ".sql")):
        stack = [norm_path(top)]
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


ACCEPT_POLL_S = 0.5  # how often the accept loop looks at its idle time and stop flag


class _ThreadStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` of the daemon: what a thread writes goes to the
    buffer that thread set (its call's output, ``captured``), else to the daemon's log.
    Calls run in threads at once, and ``contextlib.redirect_stdout`` swaps the one
    ``sys.stdout`` of the whole process."""

    def __init__(self, default: io.TextIOBase) -> None:
        super().__init__()
        self.default = default
        self.local = threading.local()

    def target(self) -> io.TextIOBase:
        return getattr(self.local, "target", None) or self.default

    def write(self, text: str) -> int:
        return self.target().write(text)

    def flush(self) -> None:
        self.target().flush()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def install_streams() -> None:
    """Routes ``sys.stdout`` and ``sys.stderr`` by thread (``_ThreadStream``); once."""
    if not isinstance(sys.stdout, _ThreadStream):
        sys.stdout = _ThreadStream(sys.stdout)  # type: ignore[arg-type]
    if not isinstance(sys.stderr, _ThreadStream):
        sys.stderr = _ThreadStream(sys.stderr)  # type: ignore[arg-type]


@contextlib.contextmanager
def captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """What this thread prints inside the block, as (stdout, stderr) buffers: per thread
    in the daemon (``install_streams``), else by swapping the process's streams."""
    out, err = io.StringIO(), io.StringIO()
    streams = (sys.stdout, sys.stderr)
    if all(isinstance(x, _ThreadStream) for x in streams):
        previous = [getattr(x.local, "target", None) for x in streams]  # type: ignore[union-attr]
        sys.stdout.local.target, sys.stderr.local.target = out, err  # type: ignore[union-attr]
        try:
            yield out, err
        finally:
            sys.stdout.local.target, sys.stderr.local.target = previous  # type: ignore[union-attr]
    else:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err


class _CallerContext:
    """The working folder and ``CCLQ_*`` environment calls run in. Both are the process's
    own, so calls run at once only when they share them (a generator's threads do); a
    call of another context waits until the running ones are done, and the daemon's own
    environment comes back whenever none runs."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.current: tuple[str, tuple[tuple[str, str], ...]] | None = None
        self.running = 0
        self.base_env = dict(os.environ)
        self.base_cwd = os.getcwd()

    @contextlib.contextmanager
    def entered(self, cwd: str, env: dict[str, str]) -> Iterator[None]:
        key = (cwd, tuple(sorted(env.items())))
        with self.cond:
            while self.running and self.current != key:
                self.cond.wait()
            if not self.running:
                os.chdir(cwd)  # the caller's folder is gone: OSError, nothing entered
                for name in [k for k in os.environ if k.startswith("CCLQ_")]:
                    del os.environ[name]
                os.environ.update(env)
                self.current = key
            self.running += 1
        try:
            yield
        finally:
            with self.cond:
                self.running -= 1
                if not self.running:
                    os.environ.clear()
                    os.environ.update(self.base_env)
                    with contextlib.suppress(OSError):
                        os.chdir(self.base_cwd)
                    self.current = None
                    self.cond.notify_all()


def serve_calls(
    wh_root: Path, run: Callable[[list[str]], int], idle_s: float, warm_up: Callable[[], None] | None = None
) -> None:
    """Answers calls until idle for ``idle_s`` or asked to stop. One daemon per warehouse:
    the lock file decides, and a second one exits at once (before ``warm_up``, the heavy
    imports). Each connection is served by a thread of its own, so the calls of a
    generator's thread pool run at once (``_CallerContext``) and each is acknowledged as
    soon as its request is read; ``run`` must be safe to call from several threads."""
    paths = daemon_paths(wh_root)
    if paths is None:
        return
    lock = open(paths["lock"], "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    if warm_up is not None:
        warm_up()
    code = caller_stamp()
    files = installed_code_stamp()
    sock_path = paths["sock"]
    server = bind_socket(sock_path)
    server.settimeout(ACCEPT_POLL_S)
    install_streams()
    context = _CallerContext()
    stopping = threading.Event()
    state = {"running": 0, "last": time.monotonic()}
    state_lock = threading.Lock()
    print(f"cclq daemon {os.getpid()} serving {wh_root} on {sock_path}", file=sys.stderr, flush=True)

    def serve_one(conn: socket.socket) -> None:
        try:
            with conn:
                if not _handle(conn, run, code, files, context):
                    stopping.set()
        except Exception as e:  # noqa: BLE001 - no request may take the daemon down
            print(f"cclq daemon: request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            with state_lock:
                state["running"] -= 1
                state["last"] = time.monotonic()

    workers: list[threading.Thread] = []
    try:
        while not stopping.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                with state_lock:
                    idle = not state["running"] and time.monotonic() - state["last"] > idle_s
                if idle:
                    break
                continue
            with state_lock:
                state["running"] += 1
            worker = threading.Thread(target=serve_one, args=(conn,), name="cclq-call", daemon=True)
            worker.start()
            workers = [w for w in workers if w.is_alive()] + [worker]
    finally:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        server.close()
        for worker in workers:  # the calls under way finish before the daemon leaves
            worker.join(timeout=DEFAULT_TIMEOUT_S)
        lock.close()


def bind_socket(sock_path: Path) -> socket.socket:
    """A listening Unix socket at ``sock_path``, bound under a new name beside it and
    renamed over the path: a dead daemon's socket there (the lock says no live one has
    it) is replaced in one step, never removed first, so a client finds the old file or
    the new socket, never no file (and then starts a daemon of its own)."""
    # "<stem>.<pid>": as short as the name it replaces (a socket path holds 107 bytes)
    scratch = sock_path.with_name(f"{sock_path.name.split('.')[0]}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        scratch.unlink()  # a dead process of the same pid left it; only this one uses the name
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(scratch))
        server.listen(128)
        os.replace(scratch, sock_path)
    except BaseException:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            scratch.unlink()
        raise
    return server


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
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and k.startswith("CCLQ_") and isinstance(v, str) for k, v in env.items()
    ):
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


def _handle(
    conn: socket.socket, run: Callable[[list[str]], int], code: str, files: str, context: _CallerContext | None = None
) -> bool:
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
    context = context or _CallerContext()
    out, err = io.StringIO(), io.StringIO()
    try:
        with context.entered(request["cwd"], request["env"]), captured() as (out, err):
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
    reply = json.dumps({"stdout": out.getvalue(), "stderr": err.getvalue(), "rc": rc})
    with contextlib.suppress(OSError):  # the caller went away
        conn.sendall(reply.encode())
    return True
