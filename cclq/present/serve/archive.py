"""Safe unpacking of uploaded trace archives (zip, tar, tar.gz, a single .gz).

An upload comes from someone we do not trust, so an archive is refused whole, and
nothing of it is left, when any member would land outside the destination folder
(``../`` or an absolute name, a drive letter, a backslash path), is a link (symbolic
or hard: traces never need one, and a link is how an archive writes outside the
folder after the fact), a device, fifo or other special file, or a second copy of a
name; and when the archive would unpack to more bytes, more files or a higher
inflation ratio than the limits allow (a zip bomb). Sizes are counted while writing,
not taken from the archive's headers, which can lie; what a header declares is checked
too, before any of it is read. Archives are walked one member at a time with every bound
checked on the way, never listed whole first (``getmembers()``/``infolist()`` built an
object per member: 178 s and 440 MB for a 7 MB tar.gz of 1,000,000 empty members): a
zip's central directory is walked entry by entry before zipfile opens it, a tar's
headers are walked once with nothing written, then tarfile extracts it member by member. Members are written with
exclusive-create, so nothing that already exists is ever overwritten.

Python's ``tarfile`` filters (``filter="data"``) would cover part of this, but not
the size, count and ratio bounds, and they rewrite some members instead of refusing
them; refusing is the clearer answer to an upload, so members are checked and
streamed here.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import stat
import struct
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

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
    # inside ``dest`` by its name alone: no part is ``..`` and nothing under ``dest`` is a
    # link (links are refused, never written), so no realpath (two per member was 11 s of
    # 20,000 members under load)
    return dest.joinpath(*parts)


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
                raise ArchiveRefused(f"member {name!r}: the upload unpacks to more than {limits.max_total_bytes} bytes")
            if budget.bytes_written > cap:
                raise ArchiveRefused(
                    f"member {name!r}: the upload inflates more than {limits.max_ratio:g}x "
                    f"its compressed size (a compression bomb?)"
                )
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


# The end-of-central-directory record (22 bytes, then a comment of up to 65535) and the
# zip64 one, as APPNOTE.TXT 4.3.14-16 lay them out.
_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # one central directory entry before its name
# Most bytes of central directory read at once (zipfile reads it whole): 20,000 entries
# with names of a few hundred bytes fit many times over
MAX_CENTRAL_DIRECTORY = 64 << 20


@dataclass(frozen=True)
class _ZipEntry:
    name: str
    external_attr: int
    file_size: int


def _central_directory(f: BinaryIO, size: int, name: str) -> tuple[int, int]:
    """(offset, size) of a zip's central directory, found as zipfile finds it (from the
    end record's position, so a zip with data before it reads the same)."""
    tail_len = min(size, _EOCD.size + 65535)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise ArchiveRefused(f"{name}: not a readable zip (no end of central directory record)")
    record = size - tail_len + at
    _, _, _, _, _, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    if at >= _EOCD64_LOCATOR.size and tail[at - _EOCD64_LOCATOR.size : at].startswith(b"PK\x06\x07"):
        eocd64 = record - _EOCD64_LOCATOR.size - _EOCD64.size
        f.seek(max(eocd64, 0))
        raw = f.read(_EOCD64.size)
        if eocd64 < 0 or len(raw) < _EOCD64.size or not raw.startswith(b"PK\x06\x06"):
            raise ArchiveRefused(f"{name}: not a readable zip (broken zip64 end record)")
        cd_size, cd_offset = _EOCD64.unpack(raw)[8:10]
        record = eocd64
    start = record - cd_size
    if start < 0 or cd_offset > record:
        raise ArchiveRefused(f"{name}: not a readable zip (bad central directory offset)")
    return start, cd_size


def _walk_zip(path: Path, dest: Path, budget: Budget) -> list[_ZipEntry]:
    """The zip's entries, read from its central directory one at a time with every bound
    checked on the way: the count (a zip of 300,000 empty entries is refused at entry
    ``max_files + 1``, before zipfile would build an object for each), names, types and
    the sizes they declare. zipfile opens the archive only after this walk."""
    limits = budget.limits
    entries: list[_ZipEntry] = []
    declared = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start, cd_size = _central_directory(f, size, path.name)
        if cd_size > MAX_CENTRAL_DIRECTORY:
            raise ArchiveRefused(
                f"{path.name}: a central directory of {cd_size} bytes, more than {MAX_CENTRAL_DIRECTORY}"
            )
        f.seek(start)
        src = io.BufferedReader(_Limited(f, cd_size), CHUNK)
        while True:
            head = src.read(_CENTRAL.size)
            if not head:
                break
            if len(head) < _CENTRAL.size or not head.startswith(b"PK\x01\x02"):
                raise ArchiveRefused(
                    f"{path.name}: not a readable zip (broken central directory entry {len(entries) + 1})"
                )
            fields = _CENTRAL.unpack(head)
            flags, usize, name_len, extra_len, comment_len, attr = (
                fields[5],
                fields[11],
                fields[12],
                fields[13],
                fields[14],
                fields[17],
            )
            raw = src.read(name_len)
            src.read(extra_len + comment_len)
            member = raw.decode("utf-8" if flags & 0x800 else "cp437", "replace")
            if len(entries) >= limits.max_files:
                raise ArchiveRefused(f"{path.name}: more than {limits.max_files} members")
            mode = attr >> 16
            if stat.S_ISLNK(mode):
                raise ArchiveRefused(f"member {member!r}: a symbolic link")
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # 0: no type recorded
                raise ArchiveRefused(f"member {member!r}: not a regular file")
            member_path(dest, member)
            if usize != 0xFFFFFFFF:  # zip64 sizes are in the extra field: bounded while copying
                declared += usize
                if declared + budget.bytes_written > limits.max_total_bytes:
                    raise ArchiveRefused(
                        f"{path.name}: declares more than {limits.max_total_bytes} bytes unpacked (at {member!r})"
                    )
            entries.append(_ZipEntry(member, attr, usize))
    return entries


class _Limited(io.RawIOBase):
    """The first ``left`` bytes of a file from where it stands (for io.BufferedReader)."""

    def __init__(self, f: BinaryIO, left: int) -> None:
        super().__init__()
        self.f, self.left = f, left

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        data = self.f.read(min(len(buf), self.left))
        buf[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _extract_zip(path: Path, dest: Path, budget: Budget, ratio_base: int) -> None:
    entries = _walk_zip(path, dest, budget)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as e:
        raise ArchiveRefused(f"{path.name}: not a readable zip ({e})") from None
    with zf:
        infos = zf.infolist()  # at most max_files entries: the walk counted them
        if [i.filename for i in infos] != [e.name for e in entries]:
            raise ArchiveRefused(f"{path.name}: not a readable zip (its central directory reads two ways)")
        for info in infos:
            target = member_path(dest, info.filename)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            budget.add_file(info.filename)
            if budget.bytes_written + info.file_size > budget.limits.max_total_bytes:
                raise ArchiveRefused(
                    f"member {info.filename!r}: the upload unpacks to more than {budget.limits.max_total_bytes} bytes"
                )
            try:
                with zf.open(info) as src:
                    _copy_bounded(src, target, budget, ratio_base, info.filename)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as e:
                raise ArchiveRefused(f"member {info.filename!r}: cannot unpack ({e})") from None


class _BoundedStream:
    """The (decompressed) tar stream tarfile reads, refusing a read larger than any
    member header or data chunk needs (tarfile reads a pax or GNU long-name header's
    declared size whole) and more bytes in all than the bounds allow."""

    def __init__(self, raw: Any, cap: int, name: str) -> None:
        self.raw, self.cap, self.name, self.read_bytes = raw, cap, name, 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > MAX_TAR_READ:
            raise ArchiveRefused(
                f"{self.name}: a tar header declares {size} bytes of metadata, more than {MAX_TAR_READ}"
            )
        data: bytes = self.raw.read(size)
        self.read_bytes += len(data)
        if self.read_bytes > self.cap:
            raise ArchiveRefused(
                f"{self.name}: the archive unpacks to more than {self.cap} bytes of tar (a compression bomb?)"
            )
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0 and offset > self.raw.tell() + MAX_TAR_READ:  # skipping data unread costs as reading it
            raise ArchiveRefused(f"{self.name}: a skip of {offset - self.raw.tell()} bytes")
        return int(self.raw.seek(offset, whence))

    def tell(self) -> int:
        return int(self.raw.tell())


MAX_TAR_READ = 1 << 20  # the largest single read of the tar stream (a pax header's records, a data chunk)


def _octal(field: bytes) -> int:
    """A tar number: octal text, or GNU's base-256 (high bit set)."""
    if field[:1] and field[0] & 0x80:
        return int.from_bytes(field[1:], "big") if field[0] == 0x80 else -1
    text = field.split(b"\0", 1)[0].strip(b" ")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        return -1


def _pax_records(data: bytes) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    while data:
        length, _, rest = data.partition(b" ")
        if not length.isdigit() or int(length) <= len(length) + 1:
            break
        record, data = rest[: int(length) - len(length) - 1], data[int(length) :]
        key, _, value = record.rstrip(b"\n").partition(b"=")
        out[key] = value
    return out


def _walk_tar_headers(stream: BinaryIO, dest: Path, budget: Budget, ratio_base: int, name: str) -> None:
    """The first of two passes over a tar: its headers alone, nothing written, every
    bound checked per member (count, type, name, the size it declares against what is
    left, the inflation), reading (never skipping unread) each member's data. tarfile's
    own walk, in the second pass, checks all of it again while it writes; this pass
    makes a 1,000,000-member archive cost 20,001 headers and no file."""
    limits = budget.limits
    count = declared = 0
    long_name: bytes | None = None
    pax: dict[bytes, bytes] = {}
    while True:
        block = stream.read(512)
        if len(block) < 512 or block == bytes(512):
            return  # the end (tarfile, in the second pass, says whether it is broken)
        size, kind = _octal(block[124:136]), block[156:157]
        if size < 0:
            raise ArchiveRefused(f"{name}: broken tar (a header with no size)")
        padded = -(-size // 512) * 512
        if kind in (b"L", b"K", b"x", b"g"):  # metadata for the next member, read whole by tarfile
            if size > MAX_TAR_READ:
                raise ArchiveRefused(
                    f"{name}: a tar header declares {size} bytes of metadata, more than {MAX_TAR_READ}"
                )
            data = stream.read(padded)[:size]
            if kind == b"L":
                long_name = data.split(b"\0", 1)[0]
            elif kind == b"x":
                pax = _pax_records(data)
            continue
        count += 1
        if count > limits.max_files:
            raise ArchiveRefused(f"{name}: more than {limits.max_files} members")
        member = pax.get(b"path") or long_name
        if member is None:
            member = block[0:100].split(b"\0", 1)[0]
            if block[257:262] == b"ustar" and block[345:500].strip(b"\0"):
                member = block[345:500].split(b"\0", 1)[0] + b"/" + member
        text = member.decode("utf-8", "replace")
        if b"size" in pax:
            size = int(pax[b"size"]) if pax[b"size"].isdigit() else -1
            padded = -(-size // 512) * 512
        long_name, pax = None, {}
        if kind in (b"1", b"2"):
            target = block[157:257].split(b"\0", 1)[0].decode("utf-8", "replace")
            raise ArchiveRefused(f"member {text!r}: a {'symbolic' if kind == b'2' else 'hard'} link (to {target!r})")
        if kind not in (b"0", b"\0", b"5", b"7"):
            raise ArchiveRefused(f"member {text!r}: not a regular file or folder")
        member_path(dest, text)
        declared += max(size, 0)
        if budget.bytes_written + declared > limits.max_total_bytes:
            raise ArchiveRefused(f"member {text!r}: the upload unpacks to more than {limits.max_total_bytes} bytes")
        if budget.bytes_written + declared > limits.max_ratio * max(ratio_base, 1):
            raise ArchiveRefused(
                f"member {text!r}: the upload inflates more than {limits.max_ratio:g}x "
                f"its compressed size (a compression bomb?)"
            )
        while padded > 0:
            got = len(stream.read(min(padded, CHUNK)))
            if not got:
                return
            padded -= got


def _open_tar_stream(path: Path, compressed: bool, budget: Budget, ratio_base: int) -> tuple[Any, _BoundedStream]:
    limits = budget.limits
    raw: Any = gzip.GzipFile(path, "rb") if compressed else open(path, "rb")
    cap = (
        min(limits.max_total_bytes, int(limits.max_ratio * max(ratio_base, 1)))
        + 1024 * (limits.max_files + 2)
        + (1 << 20)
    )  # headers: a few blocks a member
    return raw, _BoundedStream(raw, cap if compressed else max(cap, ratio_base + 1024), path.name)


def _extract_tar(path: Path, dest: Path, budget: Budget, ratio_base: int, compressed: bool) -> None:
    """Walks the members one at a time (never ``getmembers()``, which reads every
    header first: 178 s and 440 MB for a 7 MB tar.gz of 1,000,000 empty members),
    checking each before the next header is read: the count, its name and type, the size
    it declares against what is left of the bounds (skipping a member's data costs the
    same inflation as reading it)."""
    limits = budget.limits
    raw, stream = _open_tar_stream(path, compressed, budget, ratio_base)
    try:
        _walk_tar_headers(stream, dest, budget, ratio_base, path.name)  # type: ignore[arg-type]
    except (OSError, EOFError) as e:
        raise ArchiveRefused(f"{path.name}: broken tar ({e})") from None
    finally:
        raw.close()
    raw, stream = _open_tar_stream(path, compressed, budget, ratio_base)
    try:
        try:
            tf = tarfile.open(fileobj=stream, mode="r:")  # type: ignore[call-overload]
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ArchiveRefused(f"{path.name}: not a readable tar ({e})") from None
        with tf:
            count = 0
            while True:
                try:
                    m = tf.next()
                except (tarfile.TarError, OSError, EOFError, RecursionError) as e:
                    raise ArchiveRefused(f"{path.name}: broken tar ({e})") from None
                if m is None:
                    break
                count += 1
                if count > limits.max_files:
                    raise ArchiveRefused(f"{path.name}: more than {limits.max_files} members")
                tf.members.clear()  # tarfile keeps every header it read; nothing here needs them
                if m.issym() or m.islnk():
                    raise ArchiveRefused(
                        f"member {m.name!r}: a {'symbolic' if m.issym() else 'hard'} link (to {m.linkname!r})"
                    )
                if not (m.isfile() or m.isdir()):
                    raise ArchiveRefused(f"member {m.name!r}: not a regular file or folder")
                target = member_path(dest, m.name)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                budget.add_file(m.name)
                if budget.bytes_written + m.size > limits.max_total_bytes:
                    raise ArchiveRefused(
                        f"member {m.name!r}: the upload unpacks to more than {limits.max_total_bytes} bytes"
                    )
                if budget.bytes_written + m.size > limits.max_ratio * max(ratio_base, 1):
                    raise ArchiveRefused(
                        f"member {m.name!r}: the upload inflates more than {limits.max_ratio:g}x "
                        f"its compressed size (a compression bomb?)"
                    )
                src = tf.extractfile(m)
                if src is None:
                    raise ArchiveRefused(f"member {m.name!r}: cannot be read")
                try:
                    with src:
                        _copy_bounded(src, target, budget, ratio_base, m.name)
                except (tarfile.TarError, OSError, EOFError) as e:
                    raise ArchiveRefused(f"member {m.name!r}: cannot unpack ({e})") from None
    finally:
        raw.close()


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
                _extract_tar(stored, dest, budget, size, compressed=kind == "tar.gz")
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
