"""What an input folder may hold besides traces: links out of it, FIFOs and devices, a
byte order mark, the warehouse itself; and what ``python -m cclq.main`` says when the
workload it is asked about did not ingest (or the warehouse cannot be written)."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.warehouse import query, run_ingest

from cclq.compat.main import run_here
from cclq.synth.kineto import KinetoTraceBuilder

SECRET = b"root:*:20000:0:99999:7:::\n"


def _trace(path: Path, rank: int = 0, kernels: int = 2, dur_ns: int = 4_000) -> Path:
    b = KinetoTraceBuilder(rank=rank, world_size=1)
    for i in range(kernels):
        b.kernel("gemm", ts=i * 10_000, dur=dur_ns)
    return b.write(path)


# ------------------------------------------------------------ 5. links and specials
def test_a_link_out_of_the_input_folder_is_skipped_and_its_content_never_shown(tmp_path, wh):
    """``rank1.json -> /etc/shadow`` was followed, and the error showed its first bytes
    (``b'root:*:2'``). A link leaving the input folder is not followed; it is reported
    as skipped, and no message quotes a file that is not a recognised trace."""
    secret = tmp_path / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    folder = tmp_path / "in" / "w"
    _trace(folder / "rank0.json")
    (folder / "rank1.json").symlink_to(secret)
    (folder / "junk.json").write_bytes(SECRET)  # inside, not a trace: fails without quoting it
    done = invoke("ingest", str(tmp_path / "in"), "-w", str(wh.root), "--jobs", "1")
    assert done.returncode == 1
    assert "root:" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert any(
        ln.startswith(
            f"skipped: {folder / 'rank1.json'}: a symbolic link to {secret}, outside the input folder: not followed"
        )
        for ln in lines
    ), done.stderr
    assert f"cclq: error: {folder / 'junk.json'}: not a recognised trace format (text; " in done.stderr
    assert query(wh, "SELECT count(*) FROM files") == [(1,)]


def test_a_link_within_the_input_folder_is_followed(tmp_path, wh):
    _trace(tmp_path / "in" / "a" / "rank0.json")
    (tmp_path / "in" / "b").mkdir()
    (tmp_path / "in" / "b" / "rank0.json").symlink_to(tmp_path / "in" / "a" / "rank0.json")
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed and not [o for o in report.outcomes if o.status == "skipped"]
    assert query(wh, "SELECT trace, count(*) FROM files GROUP BY 1 ORDER BY 1") == [("a", 1), ("b", 1)]


def test_special_files_are_reported_as_skipped(tmp_path, wh):
    """A FIFO in a workload folder was passed by silently."""
    folder = tmp_path / "in" / "w"
    _trace(folder / "rank0.json")
    os.mkfifo(folder / "rank1.json")
    (folder / "tty.json").symlink_to("/dev/null")  # a device, and outside: the link rule says why
    report = run_ingest([tmp_path / "in"], wh)
    assert not report.failed
    skipped = {Path(o.path).name: o.message for o in report.outcomes if o.status == "skipped"}
    assert skipped["rank1.json"].endswith("rank1.json: a FIFO, not a regular file")
    assert "outside the input folder" in skipped["tty.json"]


# -------------------------------------------------------------------- 16. smaller
@pytest.mark.parametrize("reader", ["fast", "ijson"])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path, wh, reader):
    from cclq.formats.base import ReadOptions

    data = _trace(tmp_path / "plain.json").read_bytes()
    folder = tmp_path / "in" / "w"
    folder.mkdir(parents=True)
    (folder / "rank0.json").write_bytes(b"\xef\xbb\xbf" + data)
    (folder / "rank1.json.gz").write_bytes(
        gzip.compress(b"\xef\xbb\xbf" + _trace(tmp_path / "r1.json", rank=1).read_bytes())
    )
    (folder / "results.csv").write_bytes(b"\xef\xbb\xbfimplementation,mean_time (ms)\nnccl,2.5\n")
    report = run_ingest([tmp_path / "in"], wh, options=ReadOptions(reader=reader))
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT rank, count(*) FROM kernels GROUP BY 1 ORDER BY 1") == [(0, 2), (1, 2)]
    assert query(wh, "SELECT implementation, value FROM results") == [("nccl", 2.5)]


def test_a_warehouse_inside_the_input_folder_is_not_input(tmp_path):
    """``cclq ingest in -w in/wh`` read the warehouse's own files as traces: CURRENT
    failed as "not a recognised trace format" on every run."""
    _trace(tmp_path / "in" / "a" / "rank0.json")
    _trace(tmp_path / "in" / "b" / "rank0.json")
    for _ in range(2):
        done = invoke("ingest", str(tmp_path / "in"), "-w", str(tmp_path / "in" / "wh"), "-q")
        assert done.returncode == 0, done.stderr
    done = invoke("sql", "SELECT DISTINCT trace FROM files ORDER BY 1", "-w", str(tmp_path / "in" / "wh"), "-f", "csv")
    assert done.stdout.split() == ["trace", "a", "b"]
    # and inside a workload folder
    done = invoke("ingest", str(tmp_path / "in" / "a"), "-w", str(tmp_path / "in" / "a" / "wh"), "-q")
    assert done.returncode == 0, done.stderr


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_here(argv)
    return rc, out.getvalue(), err.getvalue()


def test_main_on_a_read_only_warehouse_reads_when_nothing_changed(tmp_path, monkeypatch):
    """``python -m cclq.main`` exited 2 on a read-only warehouse even with nothing to ingest."""
    import builtins

    folder = tmp_path / "in" / "w"
    _trace(folder / "rank0.json")
    wh = tmp_path / "wh"
    argv = ["--trace", str(folder), "--metric", "total_kernel_time", "--warehouse", str(wh)]
    assert _main(argv)[0] == 0
    real_open = builtins.open

    def ro_open(file, mode="r", *args, **kwargs):
        if str(file).endswith(".lock") or str(file).startswith(str(wh)) and any(c in mode for c in "wax+"):
            raise PermissionError(errno.EROFS, "Read-only file system", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", ro_open)
    rc, out, err = _main(argv)
    assert rc == 0, err
    assert float(out.splitlines()[-1]) == pytest.approx(2 * 4_000e-9)
    _trace(folder / "rank0.json", kernels=3)  # changed: it needs a write, which is refused
    os.utime(folder / "rank0.json", ns=(1, 1))
    rc, out, err = _main(argv)
    assert rc == 2 and "the warehouse is not writable" in err


# ------------------------------------------------------------- 8. stale numbers
def test_main_does_not_pass_off_an_old_number_after_a_failed_re_read(tmp_path):
    """A workload's changed file no longer parses: ``python -m cclq.main`` printed the old
    value with exit 0 (CCL-Bench reads only the last line)."""
    folder = tmp_path / "in" / "w"
    _trace(folder / "rank0.json")
    argv = ["--trace", str(folder), "--metric", "total_kernel_time", "--warehouse", str(tmp_path / "wh")]
    rc, out, _ = _main(argv)
    assert rc == 0 and float(out.splitlines()[-1]) == pytest.approx(8e-6)
    (folder / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "name": "gemm", "ts": 1,')  # cut short
    rc, out, err = _main(argv)
    assert out.splitlines()[-1] == "nan"
    assert rc == 1
    assert "rank0.json" in err and "older version" in err
    # a file that never ingested leaves no old number: the rest is current
    _trace(folder / "rank0.json")
    (folder / "rank1.json").write_text("not a trace")
    rc, out, err = _main(argv)
    assert float(out.splitlines()[-1]) == pytest.approx(8e-6) and "rank1.json" in err
