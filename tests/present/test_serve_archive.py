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
    "tar symlink out": (
        lambda d: make_tar(d / "x.tgz", [link("passwd", "/etc/passwd"), ("passwd", b"x")]),
        "symbolic link",
    ),
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


# ---------------------------------------------------------------- header bombs
# Each archive is refused member by member as it is walked: in well under 2 s and with
# under 50 MB of memory, in a fresh process (its peak RSS before and after the call).
# Before the walk, tarfile.getmembers() and zipfile's infolist() read every header first:
# the 1,000,000-member tar.gz took minutes and ~440 B of memory a member.


def _tar_headers(infos: list[tarfile.TarInfo]) -> bytes:
    return b"".join(i.tobuf(tarfile.GNU_FORMAT) for i in infos)


def million_member_tgz(path: Path) -> Path:
    """1,000,000 empty members in a ~7 MB .tar.gz, made in well under a second: gzip
    streams may follow each other in one file (RFC 1952; Python's gzip reads them as
    one), so one compressed block of 10,000 headers is written 97 times."""
    first = gzip.compress(_tar_headers([tarfile.TarInfo(f"run/f{i:07d}.json") for i in range(30_000)]), 1)
    dirs = gzip.compress(_tar_headers([_dir(f"run/d{i:05d}") for i in range(10_000)]), 1)
    with open(path, "wb") as f:
        f.write(first)
        for _ in range(97):
            f.write(dirs)
        f.write(gzip.compress(bytes(1024)))
    return path


def _dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


def big_zip(path: Path, entries: int) -> Path:
    """A zip of ``entries`` empty stored files, laid out by hand (zipfile.writestr takes
    ~10 s for 300,000): local headers, central directory, end record (APPNOTE 4.3)."""
    import struct
    import zlib

    local, central = [], []
    offset = 0
    crc = zlib.crc32(b"")
    for i in range(entries):
        name = f"f{i:06d}.json".encode()
        head = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, 0, 0, len(name), 0) + name
        local.append(head)
        central.append(
            struct.pack(
                "<4s4B4HL2L5H2L",
                b"PK\x01\x02",
                20,
                3,
                20,
                0,
                0,
                0,
                0,
                0,
                crc,
                0,
                0,
                len(name),
                0,
                0,
                0,
                0,
                (0o100644 << 16),
                offset,
            )
            + name
        )
        offset += len(head)
    cd = b"".join(central)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(cd), offset, 0)
    with open(path, "wb") as f:
        f.write(b"".join(local))
        f.write(cd)
        f.write(end)
    return path


def declared_gib_member_tgz(path: Path) -> Path:
    """One member declaring 1 GiB, its data 1 GiB of zeros (~1 MB compressed, as 16
    gzip streams of 64 MiB): skipping it to the next header inflates all of it."""
    info = tarfile.TarInfo("run/zeros.json")
    info.size = 1 << 30
    zeros = gzip.compress(bytes(64 << 20), 1)
    with open(path, "wb") as f:
        f.write(gzip.compress(_tar_headers([info]), 1))
        for _ in range(16):
            f.write(zeros)
        f.write(gzip.compress(bytes(1024)))
    return path


def pax_bomb_tgz(path: Path) -> Path:
    """A pax header declaring 512 MiB of records: tarfile reads a pax header's data whole."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = tarfile.XHDTYPE
    info.size = 512 << 20
    zeros = gzip.compress(bytes(64 << 20), 1)
    with open(path, "wb") as f:
        f.write(gzip.compress(info.tobuf(tarfile.USTAR_FORMAT), 1))
        for _ in range(8):
            f.write(zeros)
        f.write(gzip.compress(_tar_headers([tarfile.TarInfo("run/a.json")]) + bytes(1024)))
    return path


MEASURE = """
import json, resource, sys, time
from pathlib import Path
from cclq.present.serve.archive import ArchiveRefused, Limits, unpack_upload
archive, dest = Path(sys.argv[1]), Path(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    unpack_upload([(archive, archive.name)], dest, Limits())
    message = None
except ArchiveRefused as e:
    message = e.message
print(json.dumps({"seconds": time.perf_counter() - start, "message": message, "left": dest.exists(),
                  "growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
"""


@pytest.mark.parametrize(
    "case", ["1,000,000-member tar.gz", "300,000-entry zip", "member declaring 1 GiB", "pax header of 512 MiB"]
)
def test_header_bombs_are_refused_fast_and_small(case, tmp_path):
    import json
    import subprocess
    import sys

    make, words = {
        "1,000,000-member tar.gz": (lambda: million_member_tgz(tmp_path / "m.tar.gz"), "more than 20000 members"),
        "300,000-entry zip": (lambda: big_zip(tmp_path / "m.zip", 300_000), "more than 20000 members"),
        "member declaring 1 GiB": (lambda: declared_gib_member_tgz(tmp_path / "g.tar.gz"), "inflates"),
        "pax header of 512 MiB": (lambda: pax_bomb_tgz(tmp_path / "p.tar.gz"), "metadata"),
    }[case]
    archive = make()
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(archive), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["message"] and words in got["message"], got
    assert not got["left"]
    assert got["seconds"] < 2.0, got
    assert got["growth_mb"] < 50, got


def test_a_zip_whose_end_record_lies_about_its_count_is_still_walked(tmp_path):
    """zipfile reads the central directory by its size, not the end record's count: the
    walk counts the entries themselves (big_zip's end record says 65535)."""
    archive = big_zip(tmp_path / "m.zip", 30)
    with pytest.raises(ArchiveRefused) as e:
        unpack_upload([(archive, "m.zip")], tmp_path / "out", LIMITS)
    assert "more than 20 members" in e.value.message
    ok = big_zip(tmp_path / "ok.zip", 5)
    assert unpack_upload([(ok, "ok.zip")], tmp_path / "out2", LIMITS) == [f"f{i:06d}.json" for i in range(5)]
