"""What each workload is: its card and the trace's own facts (for report, diff, board).

Read from the ``traces`` view (one row per trace: format, world size, ranks, span,
and the flattened workload card). ``WorkloadInfo.metadata`` gives the card in the keys
CCL-Bench's website uses (``website/generate_data.py``: ``workload_name``,
``model_family``, ``bandwidth_scaleout``, ``comm_env`` ...), with ``""`` for what the
card leaves out, as that script writes it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from cclq.cards.load import CARD_FIELDS
from cclq.query.session import Session

# (key on CCL-Bench's website, where it comes from: a cards column or a path in the card)
_METADATA: list[tuple[str, str | tuple[str, ...]]] = [
    ("description", "description"),
    ("hf_url", "hf_url"),
    ("trace_url", "trace_url"),
    ("model_family", "model_family"),
    ("phase", "phase"),
    ("precision", "precision"),
    ("moe", "moe"),
    ("granularity", "granularity"),
    ("epochs", "epochs"),
    ("iteration", "iteration"),
    ("batch_size", "batch_size"),
    ("seq_len", "seq_len"),
    ("input_len", "input_len"),
    ("output_len", "output_len"),
    ("dataset", "dataset"),
    ("hardware_type", "hardware_type"),
    ("hardware_model", "hardware_model"),
    ("total_count", "total_count"),
    ("count_per_node", "count_per_node"),
    ("network_topology", "network_topology"),
    ("bandwidth_scaleout", "bandwidth_scaleout_gbps"),
    ("bandwidth_scaleup", "bandwidth_scaleup_gbps"),
    ("driver_version", "driver_version"),
    ("framework", "framework"),
    ("compiler", "compiler"),
    ("tp", "tp"),
    ("pp", "pp"),
    ("pp_mb", "pp_mb"),
    ("dp_replicate", "dp_replicate"),
    ("dp_shard", "dp_shard"),
    ("ep", "ep"),
    ("cp", "cp"),
    ("comm_library", "comm_library"),
    ("comm_library_ver", "comm_library_ver"),
    ("comm_env", ("Model-executor", "communication_library", "env")),
    ("protocol_selection", ("Model-executor", "protocol_selection")),
    ("trace_types", ("metric_source", "traces")),
    ("metric_traces", ("metric_source", "metrics_specific_trace")),
]
_EMPTY_CONTAINER = {"comm_env": dict, "protocol_selection": list, "trace_types": list, "metric_traces": list}
# Parallelism factors in the order people write them (DP x TP x PP ...).
PARALLELISM = (("dp_replicate", "DP"), ("dp_shard", "FSDP"), ("tp", "TP"), ("pp", "PP"), ("cp", "CP"), ("ep", "EP"))
_INFO_COLUMNS = (
    "format",
    "world_size",
    "ranks_seen",
    "ranks",
    "files",
    "events",
    "events_dropped",
    "size_bytes",
    "span_s",
    "flag",
)
_PARTIAL = re.compile(r"partial: (\d+) of (\d+) ranks")


def _plain(value: Any) -> Any:
    """A whole float as an int (100.0 -> 100), as the card wrote it."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _dig(node: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


@dataclass
class WorkloadInfo:
    """One trace with its card (``card``: the flattened fields that are set)."""

    trace: str
    info: dict[str, Any]
    card: dict[str, Any] = field(default_factory=dict)
    card_doc: dict[str, Any] | None = None  # the whole card as parsed

    @property
    def device_count(self) -> int | None:
        """Devices of the run: the card's total_count, else the profiler's world size."""
        return self.card.get("total_count") or self.info.get("world_size")

    @property
    def partial(self) -> str | None:
        """``'1 of 64 ranks'`` when the trace holds fewer ranks than the run had (the
        ``traces`` view's flag, cclq.query.partial's rule): its numbers cover those only."""
        m = _PARTIAL.search(self.info.get("flag") or "")
        return f"{m.group(1)} of {m.group(2)} ranks" if m else None

    def traced(self) -> str:
        """What was traced: ``'1 of 64 ranks traced'``, ``'8 of 8 ranks traced'``."""
        m = _PARTIAL.search(self.info.get("flag") or "")
        seen = self.info.get("ranks_seen")
        of = int(m.group(2)) if m else (self.info.get("world_size") or seen)
        return f"{seen} of {of} rank{'s' if of != 1 else ''} traced"

    def hardware(self) -> tuple[str | None, int | None, str]:
        """(device model, device count, where from): the card's hardware model (or type)
        and total_count ('card'), else the GPU model of the trace's deviceProperties and
        one device per rank of the run ('trace'), else (None, None, '')."""
        hw = self.card.get("hardware_model") or self.card.get("hardware_type")
        if hw:
            return str(hw), self.device_count, "card"
        model = self.info.get("gpu_model")
        if model:
            return str(model), self.info.get("world_size"), "trace"
        return None, None, ""

    def parallelism(self) -> str:
        """``DP 2 · TP 4`` from the card's factors above 1 (``""`` when it gives none)."""
        given = [(label, self.card[key]) for key, label in PARALLELISM if self.card.get(key) is not None]
        shown = [f"{label} {v}" for label, v in given if v != 1]
        return " · ".join(shown) if shown else ("none" if given else "")

    def headline(self) -> str:
        """One line about the run: model, phase, devices, framework, library."""
        parts = [self.card.get("model_family"), self.card.get("phase")]
        hw, n, _ = self.hardware()
        n = n or self.device_count
        parts.append(f"{n} x {hw}" if hw and n else (f"{n} rank{'s' if n != 1 else ''}" if n else hw))
        if self.partial:  # never "64 ranks" alone for a trace of one of them
            parts.append(f"PARTIAL: {self.traced()}")
        parts += [self.card.get("framework"), self.card.get("comm_library")]
        return " · ".join(str(p) for p in parts if p)

    def metadata(self) -> dict[str, Any]:
        """The card in CCL-Bench's website keys (its ``extract_metadata``)."""
        meta: dict[str, Any] = {"workload_name": self.trace}
        for key, source in _METADATA:
            value = _dig(self.card_doc, source) if isinstance(source, tuple) else self.card.get(source)
            if value is None or value == "":
                value = _EMPTY_CONTAINER[key]() if key in _EMPTY_CONTAINER else (False if key == "moe" else "")
            meta[key] = _plain(value)
        return meta


_CARD_COLUMNS = [name for name, _, _ in CARD_FIELDS]
_TRACES_SQL = (
    f"SELECT trace, {', '.join(_INFO_COLUMNS)}, card_json, {', '.join(_CARD_COLUMNS)} FROM traces ORDER BY trace"
)
_DEVICES_SQL = "SELECT trace, device_properties FROM files WHERE device_properties IS NOT NULL ORDER BY trace, file_id"
_GPU_ACTIVITY_SQL = "SELECT 1 FROM gpu_ops WHERE trace = ? LIMIT 1"
# The queries load_workloads runs, for a batch that runs it on its lanes
# (``start_on_lanes``): after the shared views among them, from their tables (gpu_models'
# probes of gpu_ops were 53 ms of a board's start before any lane began, 12 traces'
# Parquet files opened)
WORKLOAD_QUERIES = (_TRACES_SQL, _DEVICES_SQL, _GPU_ACTIVITY_SQL)


def load_workloads(session: Session) -> dict[str, WorkloadInfo]:
    """trace -> WorkloadInfo for every trace the session sees."""
    cur = session.execute(_TRACES_SQL)
    names = [d[0] for d in cur.description]
    out: dict[str, WorkloadInfo] = {}
    for values in cur.fetchall():
        row = dict(zip(names, values))
        info = {k: _plain(row[k]) for k in _INFO_COLUMNS}
        card = {k: _plain(row[k]) for k in _CARD_COLUMNS if row[k] is not None and row[k] != ""}
        if "trace_types" in card:
            card["trace_types"] = json.loads(card["trace_types"])
        doc = json.loads(row["card_json"]) if row["card_json"] else None
        out[row["trace"]] = WorkloadInfo(row["trace"], info, card, doc)
    for trace, model in gpu_models(session).items():
        if trace in out:
            out[trace].info["gpu_model"] = model
    return out


def gpu_models(session: Session) -> dict[str, str]:
    """trace -> the GPU model its files' deviceProperties name (Kineto, nsys): the name
    listed by the most files (each file's devices counted once per name), so a board or
    a report says what ran without a workload card. Traces without GPU activity have
    none (a CPU run on a host with GPUs lists them in deviceProperties too)."""
    counts: dict[str, Counter[str]] = {}
    rows = session.execute(_DEVICES_SQL).fetchall()
    # only traces with GPU activity (a CPU run on a host with GPUs lists them too): one
    # row is enough, so a GPU trace's scan stops at its first activity
    gpu = {
        trace for trace in dict.fromkeys(r[0] for r in rows) if session.execute(_GPU_ACTIVITY_SQL, [trace]).fetchone()
    }
    for trace, text in rows:
        if trace not in gpu:
            continue
        try:
            props = json.loads(text)
        except ValueError:
            continue
        names = (
            {str(p["name"]).strip() for p in props if isinstance(p, dict) and p.get("name")}
            if isinstance(props, list)
            else set()
        )
        counts.setdefault(trace, Counter()).update(n for n in names if n)
    return {trace: c.most_common(1)[0][0] for trace, c in counts.items() if c}
