"""Zip and tar archives built member by member, hostile ones included (links, devices),
for the upload tests."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path


def make_zip(path: Path, members: list[tuple[str, bytes]], symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        if symlink is not None:
            info = zipfile.ZipInfo("link")
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, symlink)
    return path


def make_tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                name, data = m
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


def link(name: str, target: str, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info
