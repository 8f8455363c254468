"""Workload cards (CCL-Bench ``workload_card.yaml``): loading and flattening.

The flattened column names follow the CCL-Bench website's metadata keys
(``model_family``, ``phase``, ``total_count``, ``tp``, ...), so a metric or a user
can read ``n_chips`` as ``total_count`` without knowing the YAML nesting. The whole
card is also kept as JSON text in ``card_json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

CARD_FILE = "workload_card.yaml"

# column, path in the card, type
CARD_FIELDS: list[tuple[str, tuple[Any, ...], str]] = [
    ("description", ("description",), "str"),
    ("hf_url", ("hf_url",), "str"),
    ("trace_url", ("trace_url",), "str"),
    ("model_family", ("workload", "model", "model_family"), "str"),
    ("phase", ("workload", "model", "phase"), "str"),
    ("precision", ("workload", "model", "precision"), "str"),
    ("moe", ("workload", "model", "moe"), "bool"),
    ("granularity", ("workload", "model", "granularity"), "str"),
    ("epochs", ("workload", "model", "epochs"), "int"),
    ("iteration", ("workload", "model", "iteration"), "int"),
    ("num_params", ("workload", "model", "model_arch", "num_params"), "float"),
    ("num_params_active", ("workload", "model", "model_arch", "num_params_active"), "float"),
    ("num_params_embedding", ("workload", "model", "model_arch", "num_params_embedding"), "float"),
    ("num_layers", ("workload", "model", "model_arch", "num_layers"), "int"),
    ("num_heads", ("workload", "model", "model_arch", "num_heads"), "int"),
    ("head_dim", ("workload", "model", "model_arch", "head_dim"), "int"),
    ("batch_size", ("workload", "data", "batch_size"), "int"),
    ("seq_len", ("workload", "data", "seq_len"), "int"),
    ("input_len", ("workload", "data", "input_len"), "int"),
    ("output_len", ("workload", "data", "output_len"), "int"),
    ("dataset", ("workload", "data", "dataset"), "str"),
    ("hardware_type", ("workload", "hardware", "xpu_spec", "type"), "str"),
    ("hardware_model", ("workload", "hardware", "xpu_spec", "model"), "str"),
    ("total_count", ("workload", "hardware", "xpu_spec", "total_count"), "int"),
    ("count_per_node", ("workload", "hardware", "xpu_spec", "count_per_node"), "int"),
    ("network_topology", ("workload", "hardware", "network_topo", "topology"), "str"),
    ("bandwidth_scaleout_gbps", ("workload", "hardware", "network_topo", "bandwidth_gbps", 0), "float"),
    ("bandwidth_scaleup_gbps", ("workload", "hardware", "network_topo", "bandwidth_gbps", 1), "float"),
    ("driver_version", ("workload", "hardware", "driver_version"), "str"),
    ("framework", ("Model-executor", "framework", "name"), "str"),
    ("compiler", ("Model-executor", "framework", "compiler_tool_selection"), "str"),
    ("dp_replicate", ("Model-executor", "model_plan_parallelization", "dp_replicate"), "int"),
    ("dp_shard", ("Model-executor", "model_plan_parallelization", "dp_shard"), "int"),
    ("tp", ("Model-executor", "model_plan_parallelization", "tp"), "int"),
    ("pp", ("Model-executor", "model_plan_parallelization", "pp"), "int"),
    ("pp_mb", ("Model-executor", "model_plan_parallelization", "pp_mb"), "int"),
    ("cp", ("Model-executor", "model_plan_parallelization", "cp"), "int"),
    ("ep", ("Model-executor", "model_plan_parallelization", "ep"), "int"),
    ("comm_library", ("Model-executor", "communication_library", "name"), "str"),
    ("comm_library_ver", ("Model-executor", "communication_library", "version"), "str"),
    ("trace_types", ("metric_source", "traces"), "json"),
]

_ARROW = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "json": pa.string()}

CARD_SCHEMA = pa.schema(
    [pa.field("trace", pa.string()), pa.field("card_json", pa.string())]
    + [pa.field(name, _ARROW[kind]) for name, _, kind in CARD_FIELDS]
)


def _dig(card: Any, path: tuple[Any, ...]) -> Any:
    node = card
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or len(node) <= step:
                return None
            node = node[step]
        else:
            if not isinstance(node, dict):
                return None
            node = node.get(step)
    return node


_INT64_MAX = 2**63 - 1


def _convert(value: Any, kind: str) -> Any:
    """A card value as its column's type; None when it does not convert (``.inf`` or
    ``1e30`` for a count, text for a number): a bad field never fails the card."""
    if value is None or value == "":
        return None
    try:
        if kind == "str":
            return str(value).strip()
        if kind == "int":
            number = float(value)
            if not math.isfinite(number) or abs(number) > _INT64_MAX:
                return None
            return int(number)
        if kind == "float":
            number = float(value)
            return number if math.isfinite(number) else None
        if kind == "bool":
            return value if isinstance(value, bool) else str(value).lower() in ("true", "yes", "1")
        return json.dumps(value, default=str)
    except (TypeError, ValueError, OverflowError):
        return None


# A card is a few KB of YAML (the template is 3.5 KB); a bigger file is not a card.
MAX_CARD_BYTES = 1 << 20


class _CardLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases: ten nested levels of ``*alias`` in a 537-byte
    file expand to billions of nodes (a "billion laughs" bomb). No card needs them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"YAML aliases (*{event.anchor}) are not allowed in a workload card "
                                 f"(line {event.start_mark.line + 1})")
        return super().compose_node(parent, index)


def load_card(path: Path) -> dict[str, Any]:
    """Parses a card; raises ``ValueError`` with a readable reason if it is not one."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CARD_BYTES + 1)
    except OSError as e:
        raise ValueError(f"cannot read: {e.strerror or e}") from e
    if len(data) > MAX_CARD_BYTES:
        raise ValueError(f"larger than {MAX_CARD_BYTES >> 20} MB: not a workload card")
    try:
        card = yaml.load(data, Loader=_CardLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise ValueError(f"invalid YAML: {str(e).splitlines()[0]}") from e
    except RecursionError as e:
        raise ValueError("invalid YAML: nested too deeply") from e
    if card is None:
        return {}
    if not isinstance(card, dict):
        raise ValueError("a workload card must be a YAML mapping")
    return card


def _finite(value: Any) -> Any:
    """The card with non-finite floats (``.inf``, ``.nan``) as text: JSON has no
    Infinity, and ``card_json`` must stay valid JSON for DuckDB's JSON functions."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def card_table(trace: str, card: dict[str, Any]) -> pa.Table:
    row: dict[str, Any] = {"trace": trace, "card_json": json.dumps(_finite(card), default=str)}
    for name, path, kind in CARD_FIELDS:
        row[name] = _convert(_dig(card, path), kind)
    return pa.Table.from_pylist([row], schema=CARD_SCHEMA)
