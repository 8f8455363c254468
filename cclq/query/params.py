"""Metric parameters: ``--param KEY=VALUE`` parsed and checked, and the ``metric_params``
relation a metric's SQL reads (the option first, then the workload card, then the default)."""

from __future__ import annotations

import math

from cclq.errors import UsageError
from cclq.query.registry import MetricSpec, did_you_mean
from cclq.sqltext import quote_literal


def parse_param_args(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise UsageError(f"--param wants KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def _number(spec: MetricSpec, name: str, value: str) -> float:
    """A ``--param`` value as the number every metric parameter is (they are DOUBLE in
    ``metric_params``). Anything else is a usage error: substituting the card's value or
    the default for a typo would print a number the user did not ask for."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise UsageError(
            f"--param {name}={value!r}: {spec.label} needs a finite number for {name}",
            hint=f"e.g. --param {name}=8 or --param {name}=7e9",
        )
    return number


def params_relation(spec: MetricSpec, given: dict[str, str]) -> str:
    unknown = set(given) - {p.name for p in spec.params}
    if unknown:
        known = ", ".join(p.name for p in spec.params) or "none"
        first = sorted(unknown)[0]
        raise UsageError(
            f"{spec.label} takes no parameter {', '.join(sorted(unknown))} (it takes: {known})",
            hint=did_you_mean(first, {p.name for p in spec.params}, "") or None,
        )
    cols = ["t.trace"]
    for p in spec.params:
        options = []
        if p.name in given:
            # repr of a float is a valid SQL numeric literal and round-trips exactly
            options.append(f"CAST({_number(spec, p.name, given[p.name])!r} AS DOUBLE)")
        if p.card_column:
            options.append(f"TRY_CAST(c.{p.card_column} AS DOUBLE)")
        if p.default is not None:
            options.append(f"TRY_CAST({quote_literal(p.default)} AS DOUBLE)")
        expr = options[0] if len(options) == 1 else f"coalesce({', '.join(options)})" if options else "NULL::DOUBLE"
        cols.append(f"{expr} AS {p.name}")
    return (
        "CREATE OR REPLACE TEMP VIEW metric_params AS SELECT "
        + ", ".join(cols)
        + " FROM (SELECT DISTINCT trace FROM files) AS t LEFT JOIN cards AS c USING (trace)"
    )


def check_batch_params(specs: list[MetricSpec], params: dict[str, str]) -> None:
    """A ``--param`` that no metric of a batch takes is a typo: a usage error, not ignored."""
    known = {p.name for s in specs for p in s.params}
    unknown = sorted(set(params) - known)
    if unknown:
        raise UsageError(
            f"no metric here takes the parameter {', '.join(unknown)} "
            f"(they take: {', '.join(sorted(known)) or 'none'})",
            hint=did_you_mean(unknown[0], known, "") or None,
        )


def params_for(spec: MetricSpec, params: dict[str, str]) -> dict[str, str]:
    """The parameters ``spec`` declares, out of a set given for many metrics at once."""
    declared = {p.name for p in spec.params}
    return {k: v for k, v in params.items() if k in declared}
