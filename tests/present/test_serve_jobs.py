"""``cclq serve``'s jobs run in child processes: a job whose process is killed (a crash
or the kernel's OOM killer look the same from outside), or that runs past
``--job-timeout``, fails with its reason and the server goes on answering and running
jobs; a server killed mid-job settles its jobs when it starts again (the running one
fails, the queued one runs). Real servers, started as processes by the test."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")
pytest.importorskip("python_multipart", reason="the serve extra is not installed")

from helpers.serve import Server, big_trace_zip, job_state, two_rank_run, wait_for, zipped_folder  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet) is gone for this purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _small(tmp_path) -> bytes:
    two_rank_run(tmp_path / "small_run")
    return zipped_folder(tmp_path / "small_run")


def test_a_job_process_killed_mid_ingest_fails_that_job_and_the_server_goes_on(tmp_path):
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv", limits=False)
    try:
        status, body = server.upload([("big.zip", big_trace_zip(tmp_path))], {"group_name": "big"})
        assert status == 200, body
        upload_id = body["upload_id"]
        wait_for(lambda: job_state(server, upload_id).get("phase") == "ingest", what="the job's ingest")
        pid = job_state(server, upload_id)["pid"]
        assert pid != server.proc.pid
        os.kill(pid, signal.SIGKILL)  # what the OOM killer does
        done = server.wait(upload_id)
        assert done["status"] == "error" and "killed (SIGKILL" in done["error"], done
        assert server.get("/health") == (200, {"ok": True})
        # the server runs the next job as before
        status, body = server.upload([("small.zip", _small(tmp_path))], {"group_name": "after"})
        assert status == 200, body
        after = server.wait(body["upload_id"])
        assert after["status"] == "done" and after["results"]["metrics"]["avg_step_time"] == 0.001, after
    finally:
        server.stop()


def test_a_job_past_its_timeout_is_stopped_and_fails(tmp_path):
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv", "--job-timeout", "1", limits=False)
    try:
        status, body = server.upload([("big.zip", big_trace_zip(tmp_path))], {"group_name": "slow"})
        assert status == 200, body
        done = server.wait(body["upload_id"])
        assert done["status"] == "error" and "longer than 1 s (--job-timeout)" in done["error"], done
        pid = job_state(server, body["upload_id"]).get("pid")
        assert pid is None
        assert server.get("/health") == (200, {"ok": True})
    finally:
        server.stop()


def test_a_server_killed_mid_job_settles_its_jobs_on_start(tmp_path):
    """Killed (SIGKILL) while one job ingests and another waits: the job's process dies
    with it; started again on the same folder, the running job says the server stopped
    and the waiting one runs."""
    root = tmp_path / "srv"
    root.mkdir()
    server = Server(root, limits=False)
    try:
        status, first = server.upload([("big.zip", big_trace_zip(tmp_path))], {"group_name": "first"})
        assert status == 200, first
        status, second = server.upload([("small.zip", _small(tmp_path))], {"group_name": "second"})
        assert status == 200, second
        wait_for(lambda: job_state(server, first["upload_id"]).get("phase") == "ingest", what="the first ingest")
        child = job_state(server, first["upload_id"])["pid"]
        assert job_state(server, second["upload_id"])["status"] == "queued"
        server.proc.kill()
        server.proc.wait(timeout=30)
        wait_for(lambda: not _alive(child), timeout=30, what="the job's process to die with the server")
    finally:
        server.stop()
    assert job_state(server, first["upload_id"])["status"] == "processing"  # as the killed server left it
    again = Server(root, limits=False)
    try:
        stopped = again.wait(first["upload_id"])
        assert stopped == {
            "status": "error",
            "error": "the server stopped during this job; upload again",
            "log": stopped["log"],
        }
        ran = again.wait(second["upload_id"])
        assert ran["status"] == "done" and ran["results"]["metrics"]["avg_step_time"] == 0.001, ran
        assert f'data-trace="{second["workload"]}"' in again.get("/")[1]
    finally:
        again.stop()


def test_uploads_sent_together_are_computed_together_each_with_its_own_answer(tmp_path):
    """Three uploads sent without waiting: the ones waiting when the worker is free go to
    one process, their metrics one batch; each job still has its own results (the
    numbers of the two-rank layout, by hand: steps of 1000 us) and board row. Killing
    that process while it computes the batch's metrics runs each of them again alone."""
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv")
    data = _small(tmp_path)
    try:
        ids = [server.upload([("run.zip", data)], {"group_name": f"together {i}"})[1]["upload_id"] for i in range(3)]
        done = [server.wait(i) for i in ids]
        assert [d["status"] for d in done] == ["done"] * 3, done
        assert all(d["results"]["metrics"]["avg_step_time"] == 0.001 for d in done)
        assert any("with 1 other upload" in d["log"] or "with 2 other upload" in d["log"] for d in done), done
        page = server.get("/")[1]
        assert all(f'data-trace="together_{i}_{u[-8:]}"' in page for i, u in enumerate(ids)), page[:500]
        # a crash while several jobs' metrics are computed together: each runs again alone
        first = server.upload([("big.zip", big_trace_zip(tmp_path, 20_000))], {"group_name": "ahead"})[1]
        wait_for(lambda: job_state(server, first["upload_id"]).get("phase") == "ingest", what="the first job")
        pair = [server.upload([("run.zip", data)], {"group_name": f"pair {i}"})[1]["upload_id"] for i in range(2)]
        ahead = server.wait(first["upload_id"])
        assert ahead["status"] == "done"
        # only the new workload is computed for the board; the three before are kept as they were
        assert "board updated: 1 workload(s) computed, 3 kept" in ahead["log"], ahead["log"]
        # both marked (the worker marks them one after the other): a kill between the two
        # would find the second ingested but not yet computing with the first
        wait_for(
            lambda: all(job_state(server, p).get("shared") is True for p in pair),
            timeout=240,
            what="the pair's metrics",
        )
        os.kill(job_state(server, pair[0])["pid"], signal.SIGKILL)
        again = [server.wait(i) for i in pair]
        assert [d["status"] for d in again] == ["done", "done"], again
        assert all("runs again alone" in d["log"] for d in again), again
    finally:
        server.stop()


def test_a_job_process_over_its_memory_bound_fails_its_job_once(tmp_path):
    """--job-memory-mb below what the job's process needs (256 MB of address space: DuckDB's
    library cannot even be mapped): the job fails with the reason, once (never queued again
    and again), and the server, outside the bound, goes on answering."""
    (tmp_path / "srv").mkdir()
    server = Server(tmp_path / "srv", "--job-memory-mb", "256")
    try:
        status, body = server.upload([("small.zip", _small(tmp_path))], {"group_name": "tight"})
        assert status == 200, body
        done = server.wait(body["upload_id"], timeout=120)
        assert done["status"] == "error", done
        assert any(w in done["error"] for w in ("failed to map", "MemoryError", "exited with status")), done
        assert server.get("/health") == (200, {"ok": True})
        time.sleep(2)
        assert job_state(server, body["upload_id"])["status"] == "error"  # settled, not run again
    finally:
        server.stop()
