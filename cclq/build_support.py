"""Build time only: the hatchling hook that compiles cclq's C extension (pyproject.toml,
``[tool.hatch.build.hooks.custom]``). Nothing in the package imports it.

``eventparse.c`` (the compiled chunk parser of the fast JSON reader, ``cclq.formats.chrome
.compiled``) is compiled with setuptools' ``build_ext``, which finds the compiler and flags
Python was built with; ``CFLAGS``/``LDFLAGS`` from the environment are added (``.ci/run``
builds it with AddressSanitizer and UBSan that way). Where it cannot be compiled (no C
compiler) the build says so and goes on without it: the fast reader then decodes with
msgspec and writes the same tables.

A wheel carries the module; an editable install (``pip install -e .``) puts it beside its
source, as hatchling's editable install reads the package from the checkout. hatchling and
not setuptools packages cclq: setuptools' editable install adds an import hook to every
Python start in the environment (it imports pathlib: 20 ms, a third of the start of the
client half of ``python -m cclq.main``).
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "cclq.formats.chrome.eventparse"
SOURCE = "cclq/formats/chrome/eventparse.c"
HEADERS = ["cclq/formats/chrome/eventparse_core.h"]


class CompiledReaderHook(BuildHookInterface):
    """Compiles ``eventparse.c`` into the wheel, or in place for an editable install."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        name = "eventparse" + sysconfig.get_config_var("EXT_SUFFIX")
        target = root / "cclq" / "formats" / "chrome" / name
        built = self._compile(root)
        if built is None:
            return
        if version == "editable":
            shutil.copyfile(built, target)  # read in place, beside its source
        else:
            build_data["force_include"][str(built)] = f"cclq/formats/chrome/{name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _compile(self, root: Path) -> Path | None:
        """The compiled module in a temporary folder, or None (and why, on stderr)."""
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext

        out = Path(tempfile.mkdtemp(prefix="cclq-build-"))
        ext = Extension(MODULE, sources=[str(root / SOURCE)], depends=[str(root / h) for h in HEADERS])
        cmd = build_ext(Distribution({"name": "cclq", "ext_modules": [ext]}))
        cmd.build_lib = str(out / "lib")
        cmd.build_temp = str(out / "tmp")
        try:
            cmd.ensure_finalized()
            cmd.run()
        except Exception as e:  # noqa: BLE001 - no compiler, or it failed: build without it
            print(f"cclq: the compiled JSON parser was not built ({type(e).__name__}: {e}); "
                  "the fast reader will decode with msgspec", file=sys.stderr)
            return None
        return Path(cmd.get_ext_fullpath(MODULE))
