"""Build time only: the hatchling hook that compiles cclq's C extension (pyproject.toml,
``[tool.hatch.build.targets.wheel.hooks.custom]``). It lives outside the package: nothing
in ``cclq`` imports it, and no wheel carries it.

``eventparse.c`` (the compiled chunk parser of the fast JSON reader, ``cclq.formats.chrome
.compiled``) is compiled with setuptools' ``build_ext``, which finds the compiler and flags
Python was built with; ``CFLAGS``/``LDFLAGS`` from the environment are added (``.ci/run``
builds it with AddressSanitizer and UBSan that way). Where it cannot be compiled the build
says why and goes on without it: the fast reader then decodes with msgspec and writes the
same tables. With ``CCLQ_REQUIRE_COMPILED=1`` (``.ci/run``) a failed compile fails the
build instead, so that an error in our own C cannot pass for a machine without a compiler.

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
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "cclq.formats.chrome.eventparse"
FOLDER = "cclq/formats/chrome"
SOURCES = [f"{FOLDER}/eventparse.c", f"{FOLDER}/eventparse_core.c", f"{FOLDER}/eventparse_json.c"]
HEADERS = [f"{FOLDER}/eventparse_core.h", f"{FOLDER}/eventparse_internal.h"]
REQUIRE = "CCLQ_REQUIRE_COMPILED"  # "1": a module that does not compile fails the build


class CompiledReaderHook(BuildHookInterface):
    """Compiles ``eventparse.c`` into the wheel, or in place for an editable install."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        name = "eventparse" + sysconfig.get_config_var("EXT_SUFFIX")
        self._temp = Path(tempfile.mkdtemp(prefix="cclq-build-"))
        try:
            built = self._compile(root, self._temp)
        except BaseException:
            self._cleanup()
            raise
        if built is None:
            self._cleanup()
            return
        if version == "editable":
            replace_file(built, root / FOLDER / name)  # read in place, beside its source
            self._cleanup()
        else:
            build_data["force_include"][str(built)] = f"{FOLDER}/{name}"  # read when the wheel is written
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        temp = getattr(self, "_temp", None)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
            self._temp = None

    def _compile(self, root: Path, out: Path) -> Path | None:
        """The compiled module in ``out``, or None (and why, on stderr); raises where
        ``CCLQ_REQUIRE_COMPILED=1`` and it does not compile."""
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext

        ext = Extension(MODULE, sources=[str(root / s) for s in SOURCES], depends=[str(root / h) for h in HEADERS])
        cmd = build_ext(Distribution({"name": "cclq", "ext_modules": [ext]}))
        cmd.build_lib = str(out / "lib")
        cmd.build_temp = str(out / "tmp")
        try:
            cmd.ensure_finalized()
            cmd.run()
        except Exception as e:  # noqa: BLE001 - no compiler, or our C did not compile: said, then decided
            why = f"{type(e).__name__}: {e}"
            if os.environ.get(REQUIRE) == "1":
                raise RuntimeError(
                    f"cclq: the compiled JSON parser does not compile ({why}); "
                    f"{REQUIRE}=1 makes that an error (the compiler's messages are above)"
                ) from e
            print(
                f"cclq: the compiled JSON parser was not built ({why}); the fast reader will decode with "
                f"msgspec (set {REQUIRE}=1 to make this an error)",
                file=sys.stderr,
            )
            return None
        return Path(cmd.get_ext_fullpath(MODULE))


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
