"""Build-time only: how setuptools puts ``sql/`` into a wheel (pyproject.toml names this
class in ``[tool.setuptools.cmdclass]``). Nothing in the package imports it.

``sql/`` sits beside the package in a checkout (``locations.sql_root`` finds it there
for an editable install); a wheel carries it as ``cclq/sql``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent.parent


class BuildPyWithSql(build_py):
    """``build_py`` that also copies ``sql/`` into the wheel as ``cclq/sql``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "cclq" / "sql"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ROOT / "sql", target)
