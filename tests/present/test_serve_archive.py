"""Safe unpacking of uploads (cclq.present.serve.archive): each hostile archive is
refused whole, with a message naming the member, and nothing is left of it; nothing is
ever written outside the destination. Standard library only (no server needed)."""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

import pytest
from helpers.archives import link, make_tar, make_zip

from cclq.present.serve.archive import ArchiveRefused, Limits, archive_kind, safe_filename, unpack_upload

LIMITS = Limits(max_upload_bytes=1 << 20, max_total_bytes=8 << 20, max_files=20, max_ratio=200.0)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def box(tmp_path: Path) -> dict[str, Path]:
    """An upload folder inside a sandbox; `outside` is where escapes would land."""
    (tmp_path / "sandbox" / "job").mkdir(parents=True)
    return {"root": tmp_path, "job": tmp_path / "sandbox" / "job", "dest": tmp_path / "sandbox" / "job" / "trace"}


def test_a_good_zip_and_tar_gz_unpack_and_a_lone_top_folder_is_flattened(box, tmp_path):
    z = make_zip(tmp_path / "a.zip", [("run/kineto_trace_0.json", b"{}"), ("run/run/nested.txt", b"x")])
    assert unpack_upload([(z, "a.zip")], box["dest"], LIMITS) == ["kineto_trace_0.json", "run/nested.txt"]
    t = make_tar(tmp_path / "b.tar.gz", [("kineto_trace_0.json", b"{}"), ("workload_card.yaml", b"a: 1\n")])
    dest2 = box["job"] / "trace2"
    assert unpack_upload([(t, "b.tar.gz")], dest2, LIMITS) == ["kineto_trace_0.json", "workload_card.yaml"]
    assert (dest2 / "workload_card.yaml").read_bytes() == b"a: 1\n"


def test_a_single_gz_is_decompressed_and_a_gzipped_trace_kept(box, tmp_path):
    notes = tmp_path / "notes.txt.gz"
    notes.write_bytes(gzip.compress(b"hello"))
    trace = tmp_path / "kineto_trace_0.json.gz"
    trace.write_bytes(gzip.compress(b"{}"))
    assert archive_kind(notes) == "gz" and archive_kind(trace) == "gz"
    written = unpack_upload([(notes, "notes.txt.gz"), (trace, "kineto_trace_0.json.gz")], box["dest"], LIMITS)
    assert written == ["kineto_trace_0.json.gz", "notes.txt"]
    assert (box["dest"] / "notes.txt").read_bytes() == b"hello"


HOSTILE = {
    "zip ../": (lambda d: make_zip(d / "x.zip", [("ok.json", b"{}"), ("../../evil.txt", b"pwned")]), "leaves"),
    "zip absolute": (lambda d: make_zip(d / "x.zip", [("/tmp/cclq-evil-abs.txt", b"pwned")]), "absolute"),
    "zip backslash": (lambda d: make_zip(d / "x.zip", [("..\\..\\evil.txt", b"pwned")]), "backslash"),
    "zip symlink": (lambda d: make_zip(d / "x.zip", [("ok.json", b"{}")], symlink="/etc/passwd"), "symbolic link"),
    "tar ../": (lambda d: make_tar(d / "x.tgz", [("a/../../evil.txt", b"pwned")]), "leaves"),
    "tar symlink out": (lambda d: make_tar(d / "x.tgz", [link("passwd", "/etc/passwd"), ("passwd", b"x")]),
                        "symbolic link"),
    "tar hardlink out": (lambda d: make_tar(d / "x.tgz", [link("h", "../../outside.txt", hard=True)]), "hard link"),
    "tar device": (lambda d: make_tar(d / "x.tgz", [_device()]), "not a regular"),
    "tar duplicate": (lambda d: make_tar(d / "x.tar", [("a.json", b"1"), ("a.json", b"2")], "w"), "second file"),
    "zip bomb": (lambda d: make_zip(d / "x.zip", [("zeros.json", bytes(4 << 20))]), "inflates"),
    "gz bomb": (lambda d: _write(d / "zeros.bin.gz", gzip.compress(bytes(4 << 20))), "inflates"),
    "too many files": (lambda d: make_zip(d / "x.zip", [(f"f{i}.json", b"{}") for i in range(21)]), "more than 20"),
    "too big": (lambda d: make_tar(d / "x.tar", [("big.bin", os.urandom(9 << 20))], "w"), "more than"),
}


def _device() -> tarfile.TarInfo:
    info = tarfile.TarInfo("dev0")
    info.type = tarfile.CHRTYPE
    return info


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_archives_are_refused_whole(case, box, tmp_path):
    make, words = HOSTILE[case]
    src = tmp_path / "src"
    src.mkdir()
    archive = make(src)
    before = files_under(box["root"])
    with pytest.raises(ArchiveRefused) as e:
        unpack_upload([(archive, archive.name)], box["dest"], LIMITS)
    assert words in e.value.message, e.value.message
    assert "\n" not in e.value.message
    assert files_under(box["root"]) == before  # nothing left, in the job folder or outside it
    assert not Path("/tmp/cclq-evil-abs.txt").exists()


def test_safe_filename():
    assert safe_filename("trace.zip") == "trace.zip"
    assert safe_filename("C:\\Users\\me\\run.tar.gz") == "run.tar.gz"
    assert safe_filename("../../x.json") == "x.json"
    assert safe_filename("..") is None and safe_filename(".hidden") is None and safe_filename("a b.zip") is None
