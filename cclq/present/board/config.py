"""CCL-Bench's website config (``website/benchmark_config.json``), read as it is.

CCL-Bench's ``website/generate_data.py`` builds ``benchmark_data.json`` from::

    {"pairs": [{"trace": "<folder>", "metrics": "auto" | [names], "required_update": bool}],
     "metric_categories": [{"id", "label", "description"}],
     "metric_info": {name: {"label", "description", "unit", "higher_is_better", "category",
                            "trace_types": [...], "phases": [...], "required_update": bool, ...}}}

and ``cclq board OUT --config FILE`` follows the same rules (``plan_pairs``):

* ``metrics: "auto"`` picks every ``metric_info`` entry whose ``trace_types`` share a
  type with the workload card's ``metric_source.traces``, and, when the entry lists
  ``phases``, whose phases include the card's ``phase``; a card without trace types
  gets no metric (CCL-Bench warns and skips the same way).
* a value is reused from the ``benchmark_data.json`` already in OUT when neither the
  pair nor the metric says ``required_update: true`` and that file has it; anything
  else is computed. A pair without ``required_update`` counts as true (CCL-Bench's
  default).
* trace paths are taken as CCL-Bench takes them: absolute, or relative to the current
  folder; each is ingested (unchanged files are skipped, so "as needed").

Values are stored as CCL-Bench stores them: 6 significant digits, ``null`` where the
metric gives no number (cclq's reason goes to ``reasons``, which CCL-Bench's page
ignores), each the number ``python -m cclq.main`` prints: in the unit CCL-Bench's own
tool prints (``MetricSpec.ccl_bench_value``). ``config_for`` writes such a config for a
warehouse.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cclq.cards.load import read_card_document
from cclq.errors import UsageError

# The trace types CCL-Bench cards name that cclq reads (docs/ccl-bench.md): a config
# cclq writes lists them all for each metric, since every cclq metric reads every
# format and answers null where it does not apply.
CCLQ_TRACE_TYPES = ["json", "json_tpu", "kineto_trace", "nsys", "sglang", "tpu_profiler"]


@dataclass(frozen=True)
class Pair:
    trace: str  # as written in the config (the row's `trace`)
    metrics: str | list[str]  # "auto" or names
    required_update: bool


@dataclass(frozen=True)
class BoardConfig:
    path: Path
    pairs: list[Pair]
    metric_info: dict[str, dict[str, Any]]
    metric_categories: list[Any]
    raw: dict[str, Any]


@dataclass
class PairPlan:
    pair: Pair
    trace_id: str | None  # the warehouse's id of the workload (None: not ingested)
    metrics: list[str]
    to_compute: list[str] = field(default_factory=list)
    cached: dict[str, float | None] = field(default_factory=dict)
    note: str | None = None  # why auto chose nothing, or why the pair failed


def load_board_config(path: Path) -> BoardConfig:
    """Reads and checks the config; a wrong shape is a usage error naming the key."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise UsageError(f"{path}: not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: the config must be a JSON object")
    info = raw.get("metric_info", {})
    if not isinstance(info, dict) or not all(isinstance(v, dict) for v in info.values()):
        raise UsageError(f"{path}: metric_info must map metric names to objects")
    pairs = []
    for i, entry in enumerate(raw.get("pairs", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("trace"), str):
            raise UsageError(f"{path}: pairs[{i}] needs a string `trace`")
        metrics = entry.get("metrics", "auto")
        if metrics != "auto" and not (isinstance(metrics, list) and all(isinstance(m, str) for m in metrics)):
            raise UsageError(f'{path}: pairs[{i}].metrics must be "auto" or a list of names')
        pairs.append(Pair(entry["trace"], metrics, bool(entry.get("required_update", True))))
    categories = raw.get("metric_categories", [])
    return BoardConfig(path, pairs, info, categories if isinstance(categories, list) else [], raw)


def auto_metrics(metric_info: dict[str, dict[str, Any]], trace_types: list[str], phase: str | None) -> list[str]:
    """CCL-Bench's "auto": the metric_info entries whose trace_types meet the card's and
    whose phases (when listed) include the card's phase; in metric_info's order."""
    types = set(trace_types)
    chosen = []
    for name, info in metric_info.items():
        if not types & set(info.get("trace_types") or []):
            continue
        phases = info.get("phases")
        if phases and str(phase or "").lower() not in {str(p).lower() for p in phases}:
            continue
        chosen.append(name)
    return chosen


def stale_metrics(metric_info: dict[str, dict[str, Any]]) -> set[str]:
    return {m for m, info in metric_info.items() if info.get("required_update", False)}


def cached_values(data_path: Path) -> dict[str, dict[str, float | None]]:
    """trace -> metric -> value of an existing benchmark_data.json (CCL-Bench reads
    -1.0 as missing too); an unreadable file is no cache."""
    try:
        data = json.loads(data_path.read_text(encoding="utf-8"))
        return {
            row["trace"]: {k: (None if v == -1.0 else v) for k, v in row.get("metrics", {}).items()}
            for row in data.get("rows", [])
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def plan_pair(
    pair: Pair,
    trace_id: str | None,
    card_types: list[str],
    phase: str | None,
    metric_info: dict[str, dict[str, Any]],
    stale: set[str],
    cache: dict[str, dict[str, float | None]],
) -> PairPlan:
    """Which metrics a pair gets and which of them must be computed."""
    if pair.metrics == "auto":
        metrics = auto_metrics(metric_info, card_types, phase)
        note = None if card_types else "the card names no trace types (metric_source.traces): auto chose nothing"
    else:
        metrics, note = list(pair.metrics), None
    plan = PairPlan(pair, trace_id, metrics, note=note)
    cached = cache.get(pair.trace, {})
    for m in metrics:
        if pair.required_update or m in stale or m not in cached:
            plan.to_compute.append(m)
        else:
            plan.cached[m] = cached[m]
    return plan


def six_digits(value: float | None) -> float | None:
    """A value as CCL-Bench's generate_data stores it: 6 significant digits; NaN,
    infinities and -1.0 are missing."""
    if value is None or not math.isfinite(value) or value == -1.0:
        return None
    return float(f"{value:.6g}")


def config_for(
    traces: dict[str, str], metric_info: dict[str, dict[str, Any]], metric_categories: list[dict[str, Any]]
) -> dict[str, Any]:
    """A benchmark_config.json for ``traces`` (trace id -> workload folder): one pair a
    workload, "auto" and required_update false, and ``metric_info`` as given."""
    return {
        "_comment": "written by `cclq board --write-config`; `cclq board OUT --config` and CCL-Bench's "
        "website/generate_data.py both read it",
        "pairs": [
            {"trace": folder, "metrics": "auto", "required_update": False} for _, folder in sorted(traces.items())
        ],
        "metric_categories": metric_categories,
        "metric_info": metric_info,
    }


def card_document(folder: Path) -> dict[str, Any] | None:
    """The card ``generate_data.py`` reads for a pair (its ``find_yaml``): the first
    ``*.yaml`` of the folder by name, whatever it is called; None when there is none or
    it cannot be read (CCL-Bench warns and goes on with the folder's name alone)."""
    try:
        first = min(folder.glob("*.yaml"), default=None)
    except OSError:
        return None
    if first is None or not first.is_file():
        return None
    try:
        return read_card_document(first)
    except ValueError:
        return None


def _section(doc: Any, key: str) -> dict[str, Any]:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


def ccl_bench_metadata(trace: str, doc: dict[str, Any] | None) -> dict[str, Any]:
    """A row's ``metadata`` as ``generate_data.py`` writes it (``extract_metadata``), key
    for key: the folder's name as written in the pair, then the card's fields, each
    ``""`` (or ``{}``, ``[]``) where the card leaves it out; with no card, the name alone."""
    meta: dict[str, Any] = {"workload_name": Path(trace).name}
    if not doc:
        return meta
    w = _section(doc, "workload")
    mod, dat, hw = _section(w, "model"), _section(w, "data"), _section(w, "hardware")
    xpu, net = _section(hw, "xpu_spec"), _section(hw, "network_topo")
    ex = _section(doc, "Model-executor")
    fw, par, cl = (
        _section(ex, "framework"),
        _section(ex, "model_plan_parallelization"),
        _section(ex, "communication_library"),
    )
    ms = _section(doc, "metric_source")
    bw = net.get("bandwidth_gbps") or []
    if not isinstance(bw, (list, tuple, str)):
        bw = []

    def text(d: dict[str, Any], key: str) -> Any:
        return d.get(key) or ""

    meta.update(
        {
            "description": str(doc.get("description") or "").strip(),
            "hf_url": doc.get("hf_url") or "",
            "trace_url": doc.get("trace_url") or "",
            "model_family": text(mod, "model_family"),
            "phase": text(mod, "phase"),
            "precision": text(mod, "precision"),
            "moe": mod.get("moe", False),
            "granularity": text(mod, "granularity"),
            "epochs": text(mod, "epochs"),
            "iteration": text(mod, "iteration"),
            "batch_size": text(dat, "batch_size"),
            "seq_len": text(dat, "seq_len"),
            "input_len": text(dat, "input_len"),
            "output_len": text(dat, "output_len"),
            "dataset": text(dat, "dataset"),
            "hardware_type": text(xpu, "type"),
            "hardware_model": text(xpu, "model"),
            "total_count": text(xpu, "total_count"),
            "count_per_node": text(xpu, "count_per_node"),
            "network_topology": text(net, "topology"),
            "bandwidth_scaleout": bw[0] if len(bw) > 0 else "",
            "bandwidth_scaleup": bw[1] if len(bw) > 1 else "",
            "driver_version": text(hw, "driver_version"),
            "framework": text(fw, "name"),
            "compiler": text(fw, "compiler_tool_selection"),
            "tp": text(par, "tp"),
            "pp": text(par, "pp"),
            "pp_mb": text(par, "pp_mb"),
            "dp_replicate": text(par, "dp_replicate"),
            "dp_shard": text(par, "dp_shard"),
            "ep": text(par, "ep"),
            "cp": text(par, "cp"),
            "comm_library": text(cl, "name"),
            "comm_library_ver": text(cl, "version"),
            "comm_env": cl.get("env") or {},
            "protocol_selection": ex.get("protocol_selection") or [],
            "trace_types": ms.get("traces") or [],
            "metric_traces": ms.get("metrics_specific_trace") or [],
        }
    )
    return json.loads(json.dumps(meta, default=str))  # as the JSON file will hold it (dates as text)


def workload_folder(paths: list[str]) -> str:
    """The folder a trace's files came from: the deepest folder holding them all."""
    dirs = [os.path.dirname(p) for p in paths]
    return os.path.commonpath(dirs) if dirs else ""
