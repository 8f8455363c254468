"""Object storage (``s3://bucket/prefix``): the few operations the warehouse and ingest need.

Why these and no more: a warehouse on S3 (``cclq.store.remote``) needs to read a small
object together with its ETag, to write one only if it is still the version read
(``If-Match``) or does not exist yet (``If-None-Match: *``), to copy files up and down
several at once, to list and to delete. s3fs (the ``s3`` extra) does them over
aiobotocore, which reads credentials and the endpoint as every AWS tool does (the
environment, ``~/.aws/config`` profiles, ``AWS_ENDPOINT_URL``): cclq takes no secret of
its own and never prints one (messages name the URL, which holds none).

Reading one small object (``CURRENT``, on every command over an ``s3://`` warehouse) goes
through a plain botocore client instead, with the same configuration: importing s3fs
(aiobotocore, aiohttp) and setting up its client cost more CPU than a warm query over the
read-through cache, so s3fs is imported only when files are copied, listed or written.

A URL cclq cannot serve is a usage error naming what to install, before anything is
touched: never a local folder named after the URL (``s3:/wh``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclq.errors import CclqError, UsageError
from cclq.locations import user_cache_dir

SCHEMES = ("s3", "s3a")  # what cclq reads and writes (S3 and any S3-compatible server)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
INSTALL_HINT = "pip install 'cclq[s3]'"
CACHE_ENV = "CCLQ_REMOTE_CACHE"  # the read-through cache's folder, else <user cache>/remote


def url_scheme(text: str | os.PathLike[str]) -> str | None:
    """The scheme of a URL (``s3``), or None for a local path."""
    m = _URL.match(os.fspath(text))
    return m.group(1).lower() if m else None


def is_url(text: str | os.PathLike[str]) -> bool:
    return url_scheme(text) is not None


def check_url(url: str) -> None:
    """A usage error for a URL cclq cannot serve: an unknown scheme, no bucket, or s3fs
    missing (what to install named)."""
    scheme = url_scheme(url)
    if scheme not in SCHEMES:
        raise UsageError(
            f"{url}: cclq cannot read or write {scheme}:// URLs; object storage is s3:// "
            "(AWS S3 or any S3-compatible server: MinIO, Ceph, GCS's and R2's S3 endpoints)",
            hint="give a local path, or an s3://bucket/prefix URL",
        )
    if not url.split("://", 1)[1].strip("/"):
        raise UsageError(f"{url}: no bucket in the URL", hint="write it as s3://bucket/prefix")
    if any(importlib.util.find_spec(m) is None for m in ("s3fs", "botocore")):  # found, not imported
        raise UsageError(
            f"{url}: reading s3:// needs the s3 extra (s3fs), which is not installed", hint=INSTALL_HINT
        ) from None


def cache_root() -> Path:
    """``$CCLQ_REMOTE_CACHE``, else ``<user cache>/remote``: safe to delete at any time
    (everything in it is a copy of an immutable object, or is fetched again)."""
    chosen = os.environ.get(CACHE_ENV)
    return Path(chosen).expanduser() if chosen else user_cache_dir() / "remote"


def url_key(url: str) -> str:
    """A folder name for a URL's copy in the cache."""
    return hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


class ChangedMeanwhile(CclqError):
    """A conditional write lost: another writer changed the object since it was read."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str  # relative to the store's prefix
    size: int
    etag: str
    mtime_ns: int


class ObjectStore:
    """The objects under one ``s3://bucket/prefix``; keys are relative to the prefix."""

    def __init__(self, url: str) -> None:
        check_url(url)
        self.url = url.rstrip("/")
        self.base = self.url.split("://", 1)[1].strip("/")  # bucket/prefix
        self.bucket = self.base.split("/", 1)[0]
        self._fs: Any = None
        self._client: Any = None

    @property
    def fs(self) -> Any:
        """The s3fs file system, made (and s3fs imported) on first use: copying, listing,
        writing."""
        if self._fs is None:
            import s3fs

            # no listings cache: a writer must see what another wrote a moment ago
            self._fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
        return self._fs

    def _s3(self) -> Any:
        """A plain botocore S3 client (the standard AWS configuration), for ``read``."""
        if self._client is None:
            import botocore.session

            self._client = botocore.session.get_session().create_client("s3")
        return self._client

    def path(self, key: str) -> str:
        return f"{self.base}/{key}" if key else self.base

    def _key(self, key: str) -> str:
        return self.path(key).split("/", 1)[1] if "/" in self.path(key) else ""

    def _error(self, e: Exception, what: str) -> CclqError:
        """A one-line error for a failed call; the URL and S3's message, never a credential."""
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        return CclqError(f"{self.url}: {what}: {text}")

    def read(self, key: str) -> tuple[bytes, str] | None:
        """An object's bytes and the ETag of exactly those bytes, or None if there is none."""
        try:
            # one GET: the body and the ETag come in the same response, so they match
            r = self._s3().get_object(Bucket=self.bucket, Key=self._key(key))
            with r["Body"] as body:
                return body.read(), str(r.get("ETag", ""))
        except Exception as e:  # noqa: BLE001 - S3's errors come as several types
            if _status(e) == 404:  # no such key (or bucket: a reader finds no warehouse either way)
                return None
            raise self._error(e, f"cannot read {key}") from e

    def put_bytes(self, key: str, data: bytes, if_match: str | None = None, if_none_match: bool = False) -> str:
        """Writes an object; ``if_match`` / ``if_none_match`` make it conditional (a
        ``ChangedMeanwhile`` when the condition fails). Returns the new ETag."""
        extra: dict[str, Any] = {}
        if if_match is not None:
            extra["IfMatch"] = if_match
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        try:
            r = self.fs.call_s3("put_object", Bucket=self.bucket, Key=self._key(key), Body=data, **extra)
        except Exception as e:  # noqa: BLE001
            if _is_precondition(e):
                raise ChangedMeanwhile(f"{self.url}: the warehouse changed meanwhile: run again") from None
            raise self._error(e, f"cannot write {key}") from e
        return str(r.get("ETag", ""))

    def upload(self, pairs: Sequence[tuple[Path, str]]) -> None:
        """Local files to keys, several at once (s3fs runs them concurrently)."""
        if not pairs:
            return
        try:
            self.fs.put([str(p) for p, _ in pairs], [self.path(k) for _, k in pairs])
        except Exception as e:  # noqa: BLE001
            raise self._error(e, "upload failed") from e

    def download(self, pairs: Sequence[tuple[str, Path]]) -> None:
        """Keys to local files, several at once, each streamed to a temporary name and
        renamed into place (a killed download leaves no half file under the real name)."""
        if not pairs:
            return
        temps = []
        for _, local in pairs:
            local.parent.mkdir(parents=True, exist_ok=True)
            temps.append(local.with_name(f".{local.name}.{uuid.uuid4().hex[:8]}.part"))
        try:
            self.fs.get([self.path(k) for k, _ in pairs], [str(t) for t in temps])
            for t, (_, local) in zip(temps, pairs):
                os.replace(t, local)
        except FileNotFoundError as e:
            raise CclqError(
                f"{self.url}: an object is gone ({e.filename or e}); it was collected after a later commit: run again"
            ) from None
        except Exception as e:  # noqa: BLE001
            raise self._error(e, "download failed") from e
        finally:
            for t in temps:
                t.unlink(missing_ok=True)

    def fetch(self, key: str, local: Path, if_match: str | None = None) -> None:
        """One object streamed to a local file (a temporary name renamed into place), only
        if its ETag is still ``if_match``: a Dask worker reading an input object that the
        client listed. A changed object is ``ChangedMeanwhile``, a gone one ``CclqError``."""
        extra: dict[str, Any] = {"IfMatch": if_match} if if_match else {}
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(f".{local.name}.{uuid.uuid4().hex[:8]}.part")
        try:
            r = self._s3().get_object(Bucket=self.bucket, Key=self._key(key), **extra)
            with r["Body"] as body, open(part, "wb") as out:
                for chunk in iter(lambda: body.read(1 << 20), b""):
                    out.write(chunk)
            os.replace(part, local)
        except Exception as e:  # noqa: BLE001 - S3's errors come as several types
            part.unlink(missing_ok=True)
            if _status(e) == 412 or _is_precondition(e):
                raise ChangedMeanwhile(f"{self.path(key)}: the object changed since it was listed: run again") from None
            if _status(e) == 404:
                raise CclqError(f"s3://{self.path(key)}: the object is gone since it was listed: run again") from None
            raise self._error(e, f"cannot read {key}") from e

    def list(self, key: str = "") -> dict[str, ObjectInfo]:
        """Every object under ``key`` (recursively), by key relative to the prefix."""
        root = self.path(key).rstrip("/")
        try:
            found = self.fs.find(root, detail=True)
        except FileNotFoundError:
            return {}
        except Exception as e:  # noqa: BLE001
            raise self._error(e, "cannot list") from e
        out: dict[str, ObjectInfo] = {}
        for name, info in found.items():
            if info.get("type") != "file":
                continue
            # "": the URL names one object, not a prefix
            rel = name[len(self.base) + 1 :] if name.startswith(self.base + "/") else "" if name == self.base else name
            modified = info.get("LastModified")
            mtime = int(modified.timestamp() * 1e9) if modified is not None else 0
            out[rel] = ObjectInfo(rel, int(info.get("size") or 0), str(info.get("ETag", "")), mtime)
        return out

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            try:
                self.fs.rm([self.path(k) for k in keys])
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001
                raise self._error(e, "cannot delete") from e


def _status(e: BaseException) -> int:
    """The HTTP status of a botocore ``ClientError`` (0 for any other error)."""
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _is_precondition(e: BaseException) -> bool:
    """Whether S3 refused a conditional request (412 PreconditionFailed, or 409 when
    two conditional writes of one key overlap)."""
    for err in (e, e.__cause__):
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                return True
    return "pre-condition" in str(e) or "precondition" in str(e).lower()


MANIFEST = ".cclq-objects.json"
SOURCE = ".cclq-source.json"  # beside a mirror: the URL it copies, so a Dask worker reads the object itself


def mirror_traces(url: str) -> Path:
    """A local copy of the trace files under ``url``, for ingest: downloaded (streamed)
    into ``<cache>/traces/<hash>/<last part of the URL>/``, the objects whose ETag and
    size are unchanged since the last copy kept as they are, with their modification
    time set from the object's, so that ingest's own check (size and mtime) skips them.
    Local files whose object is gone are removed."""
    store = ObjectStore(url)
    name = store.base.rsplit("/", 1)[-1]
    dest = cache_root() / "traces" / url_key(store.url) / name  # a folder, or the one object's copy
    dest.parent.mkdir(parents=True, exist_ok=True)
    manifest_path = dest.parent / MANIFEST
    source = dest.parent / SOURCE
    if not source.is_file():
        tmp_source = source.with_name(f"{SOURCE}.{uuid.uuid4().hex[:8]}")
        tmp_source.write_text(json.dumps({"url": store.url, "name": name}))
        os.replace(tmp_source, source)
    try:
        known: dict[str, list[Any]] = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        known = {}
    objects = store.list()
    if not objects:
        raise UsageError(f"{url}: no objects under this URL (or the bucket cannot be listed)")
    wanted: list[tuple[str, Path]] = []
    for key, info in objects.items():
        local = dest / key if key else dest
        if known.get(key) == [info.etag, info.size] and local.is_file() and local.stat().st_size == info.size:
            continue
        wanted.append((key, local))
    store.download(wanted)
    for key, local in wanted:
        info = objects[key]
        os.utime(local, ns=(info.mtime_ns, info.mtime_ns))
    for old in set(known) - set(objects):
        if old:
            (dest / old).unlink(missing_ok=True)
    fresh = {k: [i.etag, i.size] for k, i in objects.items()}
    tmp = manifest_path.with_name(f"{MANIFEST}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(fresh))
    os.replace(tmp, manifest_path)
    return dest


def mirrored_sources(paths: Sequence[Path]) -> dict[Path, tuple[str, str]]:
    """For the paths that lie in a mirror of ``mirror_traces``: the object each copies,
    as (URL, ETag of the copy). A Dask worker that does not share this machine's disk
    reads the object itself, only if it still has that ETag."""
    mirrors: dict[Path, tuple[str, dict[str, Any]] | None] = {}
    out: dict[Path, tuple[str, str]] = {}
    for path in paths:
        resolved = Path(path).resolve()
        for top in (resolved, *resolved.parents):
            if top not in mirrors:
                mirrors[top] = _mirror_of(top)
            found = mirrors[top]
            if found is not None:
                url, known = found
                key = resolved.relative_to(top).as_posix() if resolved != top else ""
                if key in known:
                    out[Path(path)] = (f"{url}/{key}" if key else url, str(known[key][0]))
                break
    return out


def _mirror_of(top: Path) -> tuple[str, dict[str, Any]] | None:
    """(URL, manifest) when ``top`` is a mirror made by ``mirror_traces``."""
    try:
        source = json.loads((top.parent / SOURCE).read_text())
        if source.get("name") != top.name:
            return None
        return str(source["url"]), json.loads((top.parent / MANIFEST).read_text())
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def local_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Trace paths as local paths: an ``s3://`` URL mirrored (``mirror_traces``), others as given."""
    return [mirror_traces(os.fspath(p)) if is_url(p) else Path(p) for p in paths]
