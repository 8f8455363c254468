"""Build time only: the hatchling hook that compiles cclq's C extensions (pyproject.toml,
``[tool.hatch.build.targets.wheel.hooks.custom]``). It lives outside the package: nothing
in ``cclq`` imports it, and no wheel carries it.

Two modules of C that this project writes, each optional (``EXTENSIONS``):

* ``eventparse`` (``eventparse.c`` over ``eventparse_core.c`` and ``eventparse_json.c``):
  the compiled chunk parser of the fast JSON reader (``cclq.formats.chrome.compiled``);
  without it the fast reader decodes with msgspec and writes the same tables;
* ``dagpath`` (``cclq/query/dagpath.c``): the longest path of HTA's critical path graph
  (``cclq.query.critical_path``); without it the same path is found in Python.

They are compiled with setuptools' ``build_ext``, which finds the compiler and flags
Python was built with; ``CFLAGS``/``LDFLAGS`` from the environment are added (``.ci/run``
builds them with AddressSanitizer and UBSan that way). Where one cannot be compiled the
build says why and goes on without it. With ``CCLQ_REQUIRE_COMPILED=1`` (``.ci/run``) a
failed compile fails the build instead, so that an error in our own C cannot pass for a
machine without a compiler.

A wheel carries the module; an editable install (``pip install -e .``) puts it beside its
source, as hatchling's editable install reads the package from the checkout. There it is
written to a new file in the same folder and renamed over the old one: a running process
that has the old module mapped keeps its inode, untouched (copying over it in place
rewrote the pages under that process, which then crashed). hatchling and not setuptools
packages cclq: setuptools' editable install adds an import hook to every Python start in
the environment (it imports pathlib: 20 ms, a third of the start of the client half of
``python -m cclq.main``).

The compiler's temporary folder is removed when the build ends (``finalize``).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CExtension(NamedTuple):  # not a dataclass: hatchling loads this file outside sys.modules
    """One compiled module: its dotted name, its C sources and headers (from the root),
    and what cclq does without it (said when it does not compile)."""

    module: str
    sources: tuple[str, ...]
    headers: tuple[str, ...]
    without: str

    @property
    def folder(self) -> str:
        return "/".join(self.module.split(".")[:-1])

    @property
    def stem(self) -> str:
        return self.module.split(".")[-1]


_READER = "cclq/formats/chrome"
EXTENSIONS = (
    CExtension(
        "cclq.formats.chrome.eventparse",
        (f"{_READER}/eventparse.c", f"{_READER}/eventparse_core.c", f"{_READER}/eventparse_json.c"),
        (f"{_READER}/eventparse_core.h", f"{_READER}/eventparse_internal.h"),
        "the fast reader will decode with msgspec",
    ),
    CExtension(
        "cclq.query.dagpath",
        ("cclq/query/dagpath.c",),
        (),
        "the critical path's longest path will be found in Python",
    ),
)
REQUIRE = "CCLQ_REQUIRE_COMPILED"  # "1": a module that does not compile fails the build


class CompiledReaderHook(BuildHookInterface):
    """Compiles ``EXTENSIONS`` into the wheel, or in place for an editable install."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        self._temp = Path(tempfile.mkdtemp(prefix="cclq-build-"))
        try:
            built = [(ext, self._compile(root, self._temp / ext.stem, ext)) for ext in EXTENSIONS]
        except BaseException:
            self._cleanup()
            raise
        made = [(ext, path) for ext, path in built if path is not None]
        for ext, path in made:
            target = f"{ext.folder}/{ext.stem}{sysconfig.get_config_var('EXT_SUFFIX')}"
            if version == "editable":
                replace_file(path, root / target)  # read in place, beside its source
            else:
                build_data["force_include"][str(path)] = target  # read when the wheel is written
        if version == "editable" or not made:
            self._cleanup()
        if made:
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        temp = getattr(self, "_temp", None)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
            self._temp = None

    def _compile(self, root: Path, out: Path, ext: CExtension) -> Path | None:
        """The compiled module in ``out``, or None (and why, on stderr); raises where
        ``CCLQ_REQUIRE_COMPILED=1`` and it does not compile."""
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext

        extension = Extension(
            ext.module, sources=[str(root / s) for s in ext.sources], depends=[str(root / h) for h in ext.headers]
        )
        cmd = build_ext(Distribution({"name": "cclq", "ext_modules": [extension]}))
        cmd.build_lib = str(out / "lib")
        cmd.build_temp = str(out / "tmp")
        try:
            cmd.ensure_finalized()
            cmd.run()
        except Exception as e:  # noqa: BLE001 - no compiler, or our C did not compile: said, then decided
            why = f"{type(e).__name__}: {e}"
            if os.environ.get(REQUIRE) == "1":
                raise RuntimeError(
                    f"cclq: {ext.module} does not compile ({why}); "
                    f"{REQUIRE}=1 makes that an error (the compiler's messages are above)"
                ) from e
            print(
                f"cclq: {ext.module} was not built ({why}); {ext.without} (set {REQUIRE}=1 to make this an error)",
                file=sys.stderr,
            )
            return None
        return Path(cmd.get_ext_fullpath(ext.module))


def replace_file(new: Path, target: Path) -> None:
    """``new``'s bytes at ``target`` by a rename: a process that has the old file open or
    mapped keeps it whole (a copy over it would rewrite the pages it runs)."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f, open(new, "rb") as src:
            shutil.copyfileobj(src, f)
        os.chmod(temp, 0o755)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
