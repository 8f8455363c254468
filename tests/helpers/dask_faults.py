"""Fault injection on a Dask cluster's workers (tests/ingest/test_dask.py). Imports
distributed: imported by a fixture that needs the dask extra, never at collection."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import distributed


class KillParses(distributed.WorkerPlugin):
    """Fault injection on the workers (re-installed on every worker the nanny restarts):
    the parse of a file whose path contains ``fragment`` runs to its end, writing its
    temp data, then the worker process is killed (SIGKILL, as the OOM killer does):
    ``once`` the first time, ``always`` every time. Each kill appends the temp files the
    dead attempt left to ``log``."""

    name = "cclq-test-kill-parses"

    def __init__(self, fragment: str, mode: str, log: str) -> None:
        self.fragment, self.mode, self.log = fragment, mode, log

    def setup(self, worker) -> None:
        import cclq.ingest.parse as ingest_module

        self.real = real = ingest_module.parse_file

        def parse_file(path: str, file_id: str, tmp_dir: str, trace: str, *options):
            result = real(path, file_id, tmp_dir, trace, *options)
            if self.fragment in path and (self.mode == "always" or not Path(self.log).exists()):
                with open(self.log, "a") as f:
                    f.write(json.dumps([tmp for _t, _r, tmp, _n in result.parts]) + "\n")
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        ingest_module.parse_file = parse_file

    def teardown(self, worker) -> None:
        import cclq.ingest.parse as ingest_module

        ingest_module.parse_file = self.real


class Faults:
    """Installs ``KillParses`` on the test cluster's workers, and takes it away."""

    def __init__(self, client) -> None:
        self.client = client
        self.installed = False

    def install(self, fragment: str, mode: str, log: Path) -> None:
        self.client.register_plugin(KillParses(fragment, mode, str(log)))
        self.installed = True

    def remove(self) -> None:
        if self.installed:
            self.client.unregister_worker_plugin(KillParses.name)
            self.installed = False
        self.client.wait_for_workers(2)  # the last one killed is back
