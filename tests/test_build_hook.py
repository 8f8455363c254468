"""The build hook (build_hooks/compiled_reader.py): a reinstall never rewrites the compiled
module a running process has loaded, a compile error in our own C fails the build where
``CCLQ_REQUIRE_COMPILED=1`` says so, and the hook leaves no temporary folder behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)

# A process that parses one chunk with the compiled parser every 5 ms until told to stop,
# checking every answer against the first; prints how many it did.
_PARSER_LOOP = r"""
import sys, time
from pathlib import Path
from cclq.formats.chrome import compiled
events = ",".join('{"ph":"X","name":"k%d","pid":1,"tid":2,"ts":%d.5,"dur":3,"args":{"stream":%d,"x":1e20}}'
                  % (i, i, i % 8) for i in range(2000))
chunk = ("[" + events + "]").encode()
def answer():
    p = compiled.parse(chunk, 60, 1 << 30, 1 << 30, 0)
    assert isinstance(p, compiled.Parsed), p
    return p.batch("f", 0)
first = answer()
assert first.num_rows == 2000
stop = Path(sys.argv[1])
print("ready", flush=True)
n = 0
while not stop.exists():
    assert answer().equals(first)
    n += 1
    time.sleep(0.005)
print(n, flush=True)
"""


def _editable_module() -> Path:
    from cclq.formats.chrome import compiled

    if compiled.eventparse is None:
        pytest.skip("the compiled parser is not built here (no C compiler at install)")
    so = Path(compiled.eventparse.__file__).resolve()
    if not so.is_relative_to(REPO):
        pytest.skip("cclq is not an editable install of this checkout")
    return so


def test_an_editable_reinstall_leaves_a_running_parser_alone(tmp_path):
    """The issue's reproduction: a process calls the compiled parse every few ms while
    `pip install -e` rebuilds and reinstalls the package; it finishes with the right
    answers, and the module it had loaded was replaced by a rename (a new inode), never
    rewritten in place. Without a compiler there is no module to replace: skipped."""
    so = _editable_module()
    before = so.stat().st_ino
    stop = tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "LDFLAGS", "LD_PRELOAD")}
    loop = subprocess.Popen(
        [sys.executable, "-c", _PARSER_LOOP, str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert loop.stdout is not None
        assert loop.stdout.readline().strip() == "ready", loop.stderr.read() if loop.stderr else ""
        temp = tmp_path / "tmp"
        temp.mkdir()
        built = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "-e", str(REPO)],
            capture_output=True,
            text=True,
            env={**env, "TMPDIR": str(temp)},
            timeout=600,
        )
        assert built.returncode == 0, built.stderr[-2000:]
        time.sleep(0.3)  # a few more parses with the new module in place
        assert loop.poll() is None, f"the parsing process died: {loop.returncode} {loop.stderr.read()[-2000:]}"
        stop.touch()
        out, err = loop.communicate(timeout=60)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
    assert loop.returncode == 0, err[-2000:]
    assert int(out.strip()) > 10
    after = so.stat()
    assert after.st_ino != before, "the module was rewritten in place, not replaced"
    assert not [p for p in so.parent.iterdir() if p.name.endswith(".tmp")]
    assert not list(temp.glob("cclq-build-*")), "the build hook left its temporary folder"


def _copy_of_checkout(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            "*.so", "*.pyd", ".venv", ".git", ".cclq", "build", "__pycache__", "*.egg-info", ".hypothesis"
        ),
    )
    return source


def _wheel(source: Path, out: Path, temp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    temp.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "LDFLAGS", "CCLQ_REQUIRE_COMPILED")}
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        env={**environ, "TMPDIR": str(temp), **env},
        timeout=600,
    )


def test_our_c_failing_to_compile_fails_the_build_where_required(tmp_path):
    """A compile error in eventparse.c is an error with CCLQ_REQUIRE_COMPILED=1 (what CI
    sets), and a note without it (the install goes on, the fast reader reads with msgspec,
    the other module is still built); either way the hook's temporary folder is gone
    afterwards."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: nothing of ours is compiled")
    source = _copy_of_checkout(tmp_path)
    c = source / "cclq" / "formats" / "chrome" / "eventparse.c"
    c.write_text(c.read_text() + "\n#error a deliberate compile error\n")

    required = _wheel(source, tmp_path / "w1", tmp_path / "t1", CCLQ_REQUIRE_COMPILED="1")
    assert required.returncode != 0
    assert "a deliberate compile error" in required.stdout + required.stderr
    assert "CCLQ_REQUIRE_COMPILED=1 makes that an error" in required.stdout + required.stderr
    assert not list((tmp_path / "w1").glob("*.whl")) if (tmp_path / "w1").exists() else True
    assert not list((tmp_path / "t1").glob("cclq-build-*"))

    optional = _wheel(source, tmp_path / "w2", tmp_path / "t2")
    assert optional.returncode == 0, optional.stderr[-2000:]
    (whl,) = (tmp_path / "w2").glob("cclq-*.whl")
    compiled = [n for n in zipfile.ZipFile(whl).namelist() if n.endswith((".so", ".pyd"))]
    assert [n.split(".")[0] for n in compiled] == ["cclq/query/dagpath"]
    assert not list((tmp_path / "t2").glob("cclq-build-*"))


def test_a_wheel_build_leaves_no_temporary_folder_and_nothing_imports_the_hook(tmp_path):
    """The compiled module reaches the wheel from the hook's temporary folder, which is
    removed once the wheel is written; the hook is not part of the package."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here")
    built = _wheel(_copy_of_checkout(tmp_path), tmp_path / "w", tmp_path / "t", CCLQ_REQUIRE_COMPILED="1")
    assert built.returncode == 0, built.stderr[-2000:]
    (whl,) = (tmp_path / "w").glob("cclq-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert [n for n in names if n.startswith("cclq/formats/chrome/eventparse.") and n.endswith(".so")]
    assert [n for n in names if n.startswith("cclq/query/dagpath.") and n.endswith(".so")]
    assert not [n for n in names if "build_hooks" in n or "build_support" in n]
    assert not list((tmp_path / "t").glob("cclq-build-*"))
    users = [
        str(p)
        for p in (REPO / "cclq").rglob("*.py")
        if re.search(r"^\s*(from|import)\s+build_hooks\b", p.read_text(), flags=re.M)
    ]
    assert not users
