"""A query's rows and the operators DuckDB ran for it (its JSON profile), for tests that
check a plan's shape (an ASOF join instead of a join per thread or rank)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cclq.query.session import Session


def profiled(session: Session, sql: str, profile_path: Path) -> tuple[list[tuple], list[dict[str, Any]]]:
    """``sql``'s rows and every operator of its plan, depth first, each with ``name`` and
    ``intermediate_rows`` whatever the DuckDB release calls them."""
    session.execute("PRAGMA enable_profiling = 'json'")
    session.execute(f"PRAGMA profiling_output = '{profile_path}'")
    rows = session.execute(sql).fetchall()
    session.execute("PRAGMA disable_profiling")
    return rows, operators(json.loads(profile_path.read_text()))


def operators(profile: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        # DuckDB 2.0 names an operator's fields name / intermediate_rows under "operator";
        # 1.5.6 names them operator_name / operator_cardinality under "children"
        out.append(
            {
                **node,
                "name": node.get("name", node.get("operator_name")),
                "intermediate_rows": node.get("intermediate_rows", node.get("operator_cardinality")),
            }
        )
        for child in node.get("children", []):
            walk(child)

    for node in profile.get("operator", profile.get("children", [])):
        walk(node)
    return out
