"""What `cclq metric` and `cclq metrics` write beyond one metric's table: several metrics
as one long table (``write_long_form``), and which metrics may apply to a trace and why
the others cannot (``write_applicable``). Imported by a command when it writes (it
loads pyarrow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclq.present.output import OutputFormat, dump_json, write_lines
from cclq.present.render import write_table

if TYPE_CHECKING:
    from cclq.query.applicability import TraceFacts


def write_applicable(trace: str, facts: TraceFacts, specs: list, fmt: OutputFormat, output: Path | None) -> None:
    """``cclq metrics --applicable TRACE``: the catalog's decision for each metric."""
    import pyarrow as pa

    from cclq.query.applicability import parse_facts, unmet

    rows = []
    for s in specs:
        reason = unmet(s, facts)
        checked = ", ".join(str(f) for f in parse_facts(s))
        rows.append(
            {
                "metric": s.name,
                "category": s.category,
                "applies": "no" if reason else "may",
                "why": reason
                or (
                    f"the catalog has {checked}; its SQL decides"
                    if checked
                    else "no catalog facts declared; its SQL decides"
                ),
                "needs": s.needs,
            }
        )
    rows.sort(key=lambda r: (r["applies"] == "no", r["category"], r["metric"]))
    if fmt is not OutputFormat.table:
        write_table(pa.Table.from_pylist(rows), fmt, output=output)
        return
    may = sum(r["applies"] == "may" for r in rows)
    print(
        f"{trace}: formats {', '.join(sorted(facts.formats)) or 'none'}, tables "
        f"{', '.join(sorted(facts.tables)) or 'none'}, {facts.ranks} rank(s), "
        f"card phase {facts.card_phase if facts.card_phase is not None else 'none'}\n"
        f"{may} metric(s) may apply (their SQL decides), {len(rows) - may} cannot (from the catalog):"
    )
    write_lines([(r["metric"], r["applies"], r["why"]) for r in rows], output)


def detail_type(types: list) -> Any:  # noqa: ANN401 - a pyarrow DataType
    """One type for a detail column that several metrics return: theirs if they agree,
    else text."""
    import pyarrow as pa

    known = {t for t in types if not pa.types.is_null(t)}
    if len(known) == 1:
        return known.pop()
    return pa.null() if not known else pa.string()


def write_long_form(ok: list, fmt: OutputFormat, output: Path | None) -> None:  # list[MetricRun]
    """Several metrics as one long table: a `metric` column, the fixed columns and each
    metric's own columns in `details`: a struct in Parquet (fields: every detail column
    of every metric, null where a metric has none), an object of that metric's own
    columns in JSON, a JSON text in CSV and the table."""
    import pyarrow as pa

    from cclq.query.outcomes import FIXED_COLUMNS

    own: dict[str, list[str]] = {}
    types: dict[str, list] = {}
    for run in ok:
        own[run.spec.name] = [c for c in run.table.column_names if c not in FIXED_COLUMNS]
        for c in own[run.spec.name]:
            types.setdefault(c, []).append(run.table.schema.field(c).type)
    struct = pa.struct([(c, detail_type(t)) for c, t in types.items()]) if types else None
    rows = []
    for run in ok:
        for row in run.table.to_pylist():
            details = {k: row[k] for k in own[run.spec.name]}
            if struct is not None and details:
                details = {
                    k: (
                        str(v)
                        if v is not None and pa.types.is_string(struct.field(k).type) and not isinstance(v, str)
                        else v
                    )
                    for k, v in details.items()
                }
            rows.append(
                {
                    "metric": run.spec.name,
                    "version": run.spec.version,
                    **{k: row[k] for k in FIXED_COLUMNS},
                    "details": details or None,
                }
            )
    if fmt is OutputFormat.json:
        dump_json(rows, output)
        return
    fields = [
        ("metric", pa.string()),
        ("version", pa.int32()),
        ("trace", pa.string()),
        ("rank", pa.int32()),
        ("step", pa.int64()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("reason", pa.string()),
    ]
    if fmt is OutputFormat.parquet and struct is not None:
        schema = pa.schema([*fields, ("details", struct)])
    else:
        schema = pa.schema([*fields, ("details", pa.string())])
        rows = [{**r, "details": json.dumps(r["details"], default=str) if r["details"] else None} for r in rows]
    write_table(
        pa.Table.from_pylist(rows, schema=schema),
        fmt,
        output=output,
        title=f"{len(ok)} metrics (long form; `details` holds each metric's own columns)",
    )
