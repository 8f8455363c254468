"""Running ``cclq``: in this process (``invoke``) or in a fresh one (``run_cli``).

Both go through ``cclq.cli.app.main``, the entry point with the error contract (one line,
an exit status), and both return a ``subprocess.CompletedProcess`` (``returncode``,
``stdout``, ``stderr`` as text), so a test can move from one to the other unchanged.

``invoke`` is for output-format contracts: what a command prints and its exit status,
~0.05 s instead of the ~0.5 s a fresh interpreter costs. ``run_cli`` is for what only a
process shows: start-up (imports, time), signals, memory limits, a child that writes to
the terminal itself (``cclq shell``), what outlives the command (the daemon).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner  # typer 0.28 vendors click (no click installed without an extra)

# The entry point as the `cclq` script runs it: `cclq` is the program's name in usage lines.
ENTRY = "import sys; sys.argv[0] = 'cclq'; from cclq.cli.app import main; main()"


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs the real `cclq` entry point in a subprocess (exit codes, stderr)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
    )


def invoke(
    *args: str, env: dict | None = None, cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess:
    """Runs ``cclq ARGS`` in this process as ``run_cli`` runs it in another: ``main()``
    with this argv, stdout and stderr captured apart, ``env`` over the environment, in
    ``cwd``, the program named ``cclq`` in usage lines (click reads ``sys.argv[0]`` and
    how ``__main__`` was started). Whatever a command changes of the process (the
    environment, the working folder, the ``cclq`` logger's handlers) is put back."""
    from cclq.cli.app import main

    saved_env = dict(os.environ)
    saved_argv = sys.argv
    main_module = sys.modules["__main__"]
    saved_package = main_module.__dict__.get("__package__")
    saved_cwd = os.getcwd()
    logger = logging.getLogger("cclq")
    saved_log = (list(logger.handlers), logger.level, logger.propagate)
    runner = CliRunner()
    try:
        with runner.isolation(input=input, env=env) as (out, err, _):
            if cwd is not None:
                os.chdir(cwd)
            sys.argv = ["cclq", *args]
            main_module.__package__ = None  # as a script, not `python -m pytest`
            code: int = 0
            try:
                main()
            except SystemExit as e:
                if e.code is None:
                    code = 0
                elif isinstance(e.code, int):
                    code = e.code
                else:  # sys.exit("message"): the message on stderr, status 1, as Python does
                    print(e.code, file=sys.stderr)
                    code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout = out.getvalue().decode("utf-8", "replace")
            stderr = err.getvalue().decode("utf-8", "replace")
    finally:
        sys.argv = saved_argv
        main_module.__package__ = saved_package
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logger.handlers[:] = saved_log[0]
        logger.setLevel(saved_log[1])
        logger.propagate = saved_log[2]
    return subprocess.CompletedProcess(["cclq", *args], code, stdout, stderr)


# Bytes of address space for a capped cclq process. Address space, not memory: pyarrow's
# allocator reserves 1 GiB of it at start-up and glibc 64-128 MiB per thread that mallocs
# (~1.5 GiB before the first byte is read, with the catalog's and Arrow's threads), so the
# cap leaves ~1 GiB to the read itself.
MEMORY_CAP = 2560 << 20


def run_capped(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """Runs ``cclq`` in a subprocess with its address space capped (the hostile-input
    tests: a bound that does not hold fails the test, never the machine); (process, seconds)."""
    import resource
    import time

    def cap() -> None:
        # AddressSanitizer (.ci/run's run of the compiled parser) maps terabytes of shadow
        # memory: there the cap is left off and the bounds are still checked by the answers
        if "libasan" not in os.environ.get("LD_PRELOAD", ""):
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=timeout, preexec_fn=cap
    )
    return done, time.perf_counter() - start
