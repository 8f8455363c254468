"""Safe unpacking of uploaded trace archives (zip, tar, tar.gz, a single .gz).

An upload comes from someone we do not trust, so an archive is refused whole, and
nothing of it is left, when any member would land outside the destination folder
(``../`` or an absolute name, a drive letter, a backslash path), is a link (symbolic
or hard: traces never need one, and a link is how an archive writes outside the
folder after the fact), a device, fifo or other special file, or a second copy of a
name; and when the archive would unpack to more bytes, more files or a higher
inflation ratio than the limits allow (a zip bomb). Sizes are counted while writing,
not taken from the archive's headers, which can lie. Members are written with
exclusive-create, so nothing that already exists is ever overwritten.

Python's ``tarfile`` filters (``filter="data"``) would cover part of this, but not
the size, count and ratio bounds, and they rewrite some members instead of refusing
them; refusing is the clearer answer to an upload, so members are checked and
streamed here.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

CHUNK = 1 << 16
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class ArchiveRefused(Exception):
    """The upload is refused; ``message`` says which member and why (one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Bounds on one upload. The defaults suit a trace folder of a few GB of JSON."""

    max_upload_bytes: int = 1 << 30  # the request body
    max_total_bytes: int = 8 << 30  # everything unpacked, all archives of the upload together
    max_files: int = 20_000  # members unpacked, all archives together
    max_ratio: float = 200.0  # unpacked bytes / archive bytes (JSON traces gzip ~10-30x)


@dataclass
class Budget:
    """What is left of the limits while an upload's archives are unpacked."""

    limits: Limits
    bytes_written: int = 0
    files_written: int = 0

    def add_file(self, name: str) -> None:
        self.files_written += 1
        if self.files_written > self.limits.max_files:
            raise ArchiveRefused(f"more than {self.limits.max_files} files in the upload (at {name})")


def safe_filename(name: str) -> str | None:
    """The last component of an uploaded file's name, if it is a plain safe name."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return base if _SAFE_NAME.match(base) and base not in (".", "..") else None


def member_path(dest: Path, name: str) -> Path:
    """Where a member named ``name`` goes under ``dest``; refuses any name that is not
    a plain relative path inside it."""
    if not name or "\x00" in name:
        raise ArchiveRefused(f"member {name!r}: empty name or NUL byte")
    if "\\" in name:
        raise ArchiveRefused(f"member {name!r}: backslash in the name (a Windows path)")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise ArchiveRefused(f"member {name!r}: absolute path")
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ArchiveRefused(f"member {name!r}: path leaves the upload folder")
    target = dest.joinpath(*parts)
    root = os.path.realpath(dest)
    if os.path.commonpath([root, os.path.realpath(target)]) != root:
        raise ArchiveRefused(f"member {name!r}: path leaves the upload folder")
    return target


def _copy_bounded(src: Readable, target: Path, budget: Budget, ratio_base: int, name: str) -> None:
    """Streams one member to a new file, refusing as soon as a bound is crossed."""
    limits = budget.limits
    cap = min(limits.max_total_bytes, int(limits.max_ratio * max(ratio_base, 1)))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        out = open(target, "xb")
    except FileExistsError:
        raise ArchiveRefused(f"member {name!r}: a second file of that name") from None
    with out:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            budget.bytes_written += len(chunk)
            if budget.bytes_written > limits.max_total_bytes:
                raise ArchiveRefused(f"member {name!r}: the upload unpacks to more than "
                                     f"{limits.max_total_bytes} bytes")
            if budget.bytes_written > cap:
                raise ArchiveRefused(f"member {name!r}: the upload inflates more than {limits.max_ratio:g}x "
                                     f"its compressed size (a compression bomb?)")
            out.write(chunk)


def archive_kind(path: Path) -> str | None:
    """'zip', 'tar', 'tar.gz', 'gz' (one compressed file), or None (not an archive),
    from the content, not the name."""
    with open(path, "rb") as f:
        head = f.read(512)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        try:
            with gzip.open(path, "rb") as g:
                inner = g.read(512)
        except (OSError, EOFError):
            return "gz"  # a broken gzip: its unpacking fails with a clear message
        return "tar.gz" if len(inner) >= 262 and inner[257:262] == b"ustar" else "gz"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def _extract_zip(path: Path, dest: Path, budget: Budget, ratio_base: int) -> None:
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise ArchiveRefused(f"{path.name}: not a readable zip ({e})") from None
    with zf:
        infos = zf.infolist()
        for info in infos:  # check every name before writing anything
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ArchiveRefused(f"member {info.filename!r}: a symbolic link")
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # 0: no type recorded
                raise ArchiveRefused(f"member {info.filename!r}: not a regular file")
            member_path(dest, info.filename)
        declared = sum(i.file_size for i in infos)
        if declared > budget.limits.max_total_bytes:
            raise ArchiveRefused(f"{path.name}: declares {declared} bytes unpacked, more than "
                                 f"{budget.limits.max_total_bytes}")
        for info in infos:
            target = member_path(dest, info.filename)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            budget.add_file(info.filename)
            try:
                with zf.open(info) as src:
                    _copy_bounded(src, target, budget, ratio_base, info.filename)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as e:
                raise ArchiveRefused(f"member {info.filename!r}: cannot unpack ({e})") from None


def _extract_tar(path: Path, dest: Path, budget: Budget, ratio_base: int) -> None:
    try:
        tf = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ArchiveRefused(f"{path.name}: not a readable tar ({e})") from None
    with tf:
        try:
            members = tf.getmembers()  # reads the headers only (a bounded walk of the stream)
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ArchiveRefused(f"{path.name}: broken tar ({e})") from None
        if len(members) > budget.limits.max_files:
            raise ArchiveRefused(f"{path.name}: {len(members)} members, more than {budget.limits.max_files}")
        for m in members:  # check every member before writing anything
            if m.issym() or m.islnk():
                raise ArchiveRefused(f"member {m.name!r}: a {'symbolic' if m.issym() else 'hard'} link "
                                     f"(to {m.linkname!r})")
            if not (m.isfile() or m.isdir()):
                raise ArchiveRefused(f"member {m.name!r}: not a regular file or folder")
            member_path(dest, m.name)
        for m in members:
            target = member_path(dest, m.name)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            budget.add_file(m.name)
            src = tf.extractfile(m)
            if src is None:
                raise ArchiveRefused(f"member {m.name!r}: cannot be read")
            try:
                with src:
                    _copy_bounded(src, target, budget, ratio_base, m.name)
            except (tarfile.TarError, OSError, EOFError) as e:
                raise ArchiveRefused(f"member {m.name!r}: cannot unpack ({e})") from None


def _extract_gz(path: Path, dest: Path, budget: Budget, ratio_base: int, name: str) -> None:
    out_name = name[:-3] if name.endswith(".gz") else name + ".out"
    target = member_path(dest, out_name)
    budget.add_file(out_name)
    try:
        with gzip.open(path, "rb") as src:
            _copy_bounded(src, target, budget, ratio_base, out_name)
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise ArchiveRefused(f"{name}: broken gzip ({e})") from None


def unpack_upload(files: list[tuple[Path, str]], dest: Path, limits: Limits) -> list[str]:
    """Lays the uploaded ``files`` ((stored path, original safe name)) out in ``dest``:
    archives unpacked, a single .gz decompressed, anything else copied as is; then a
    lone top folder is flattened (``foo.zip`` holding ``foo/``), as CCL-Bench's
    process_upload does. Returns the relative paths written. On refusal ``dest`` is
    removed whole and ``ArchiveRefused`` says why."""
    budget = Budget(limits)
    dest.mkdir(parents=True, exist_ok=False)
    try:
        for stored, name in files:
            kind = archive_kind(stored)
            size = stored.stat().st_size
            if kind == "zip":
                _extract_zip(stored, dest, budget, size)
            elif kind in ("tar", "tar.gz"):
                _extract_tar(stored, dest, budget, size)
            elif kind == "gz" and not name.endswith((".json.gz", ".trace.json.gz")):
                _extract_gz(stored, dest, budget, size, name)
            else:  # a plain file, or a gzipped trace: ingest reads it as it is, within its
                # own inflation bounds (cclq.formats.limits)
                target = member_path(dest, name)
                budget.add_file(name)
                with open(stored, "rb") as src:
                    _copy_bounded(src, target, budget, size, name)
        entries = [e for e in dest.iterdir() if not e.name.startswith(".")]
        if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
            top = dest / ".flatten"  # a child may share the top folder's name
            entries[0].rename(top)
            for child in list(top.iterdir()):
                child.rename(dest / child.name)
            top.rmdir()
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
