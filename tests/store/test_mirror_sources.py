"""Which object a mirrored trace file copies (``mirrored_sources``): what a Dask worker
without the client's disk reads instead of the client's copy. No server needed: the
mirror's two small files are written as ``mirror_traces`` writes them."""

from __future__ import annotations

import json
from pathlib import Path

from cclq.store.objects import MANIFEST, SOURCE, mirrored_sources


def _mirror(parent: Path, url: str, name: str, objects: dict[str, str]) -> Path:
    dest = parent / name
    for key in objects:
        target = dest / key if key else dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{}")
    (parent / SOURCE).write_text(json.dumps({"url": url, "name": name}))
    (parent / MANIFEST).write_text(json.dumps({k: [etag, 2] for k, etag in objects.items()}))
    return dest


def test_files_of_a_mirrored_folder_name_their_objects_and_etags(tmp_path: Path) -> None:
    dest = _mirror(tmp_path / "m1", "s3://bucket/runs/traces", "traces", {"a/rank0.json": '"e0"', "b/r1.json": '"e1"'})
    local = tmp_path / "plain.json"
    local.write_text("{}")
    found = mirrored_sources([dest / "a" / "rank0.json", dest / "b" / "r1.json", local])
    assert found == {
        dest / "a" / "rank0.json": ("s3://bucket/runs/traces/a/rank0.json", '"e0"'),
        dest / "b" / "r1.json": ("s3://bucket/runs/traces/b/r1.json", '"e1"'),
    }  # a file outside any mirror is read by its path


def test_one_mirrored_object_and_a_file_the_manifest_does_not_name(tmp_path: Path) -> None:
    one = _mirror(tmp_path / "m2", "s3://bucket/one.json", "one.json", {"": '"x"'})
    assert mirrored_sources([one]) == {one: ("s3://bucket/one.json", '"x"')}
    dest = _mirror(tmp_path / "m3", "s3://bucket/t", "t", {"r0.json": '"y"'})
    stray = dest / "not-listed.json"
    stray.write_text("{}")
    assert mirrored_sources([stray]) == {}
