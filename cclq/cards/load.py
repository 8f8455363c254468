"""Workload cards (CCL-Bench ``workload_card.yaml``): finding, loading and flattening.

A workload folder's card is, first found: ``workload_card.yaml``; the card named after
the folder (``<folder>.yaml``, as CCL-Bench's ``trace_collection`` names them); or
``workload.toml``. That TOML is either a card written in TOML (the template's tables:
``[workload.model]`` ...) or, as in CCL-Bench's newer torchtitan workloads, the
torchtitan job config, whose description, model, batch and parallelism degrees are
mapped onto the card's fields (``card_from_torchtitan``).

The flattened column names follow the CCL-Bench website's metadata keys
(``model_family``, ``phase``, ``total_count``, ``tp``, ...), so a metric or a user
can read ``n_chips`` as ``total_count`` without knowing the YAML nesting. The whole
card is also kept as JSON text in ``card_json``.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

CARD_FILE = "workload_card.yaml"
TOML_CARD_FILE = "workload.toml"

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
# The template nests 5 levels; 1 KB of ``[[[...]]]`` nests 500, which every recursive
# walk of the card (JSON, the checks) would follow into a RecursionError.
MAX_CARD_DEPTH = 32


def card_depth(doc: Any, stop: int = MAX_CARD_DEPTH + 1) -> int:
    """How deep mappings and lists nest in a parsed card (a scalar is 0), counted
    without recursion and only up to ``stop``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth >= stop:
                return deepest
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


@functools.cache
def _card_loader() -> type:
    """``yaml.SafeLoader`` without aliases: ten nested levels of ``*alias`` in a 537-byte
    file expand to billions of nodes (a "billion laughs" bomb). No card needs them.
    (Made on first use: yaml is not imported by commands that read no card.)"""
    import yaml

    class CardLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.YAMLError(
                    f"YAML aliases (*{event.anchor}) are not allowed in a workload card "
                    f"(line {event.start_mark.line + 1})"
                )
            return super().compose_node(parent, index)

    return CardLoader


def find_card(folder: Path) -> Path | None:
    """The card of a workload folder (see the module docstring for the order), or None."""
    for name in (CARD_FILE, f"{folder.name}.yaml", f"{folder.name}.yml", TOML_CARD_FILE):
        path = folder / name
        if path.is_file():
            return path
    return None


def _read_toml(text: str) -> dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError as e:
            raise ValueError("reading a TOML card needs Python 3.11+ or `pip install tomli` (the `toml` extra)") from e
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"invalid TOML: {e}") from e
    except RecursionError as e:
        raise ValueError(f"nested deeper than {MAX_CARD_DEPTH} levels: not a workload card") from e


def is_torchtitan_config(doc: dict[str, Any]) -> bool:
    """Whether a TOML document is a torchtitan job config rather than a card."""
    return not ({"workload", "Model-executor"} & doc.keys()) and bool({"parallelism", "job", "training"} & doc.keys())


# torchtitan [parallelism] key -> the card's model_plan_parallelization key
TORCHTITAN_PARALLELISM = {
    "data_parallel_replicate_degree": "dp_replicate",
    "data_parallel_shard_degree": "dp_shard",
    "tensor_parallel_degree": "tp",
    "pipeline_parallel_degree": "pp",
    "context_parallel_degree": "cp",
    "expert_parallel_degree": "ep",
    "pipeline_parallel_microbatch_size": "pp_mb",
}
_TORCH_DTYPES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16", "float8": "fp8"}


def card_from_torchtitan(doc: dict[str, Any]) -> dict[str, Any]:
    """The card fields a torchtitan job config states, in the card template's structure.

    A degree of -1 ("whatever is left", torchtitan's default for data_parallel_shard) says
    nothing by itself and is left out; the global batch is ``training.global_batch_size``,
    else the local batch times the data-parallel degrees when they are all known.
    """
    job, model, training = (doc.get(k) or {} for k in ("job", "model", "training"))
    degrees = {
        card_key: v
        for key, card_key in TORCHTITAN_PARALLELISM.items()
        if isinstance(v := (doc.get("parallelism") or {}).get(key), int) and v >= 1
    }
    batch = training.get("global_batch_size")
    if not (isinstance(batch, int) and batch > 0):
        local = training.get("local_batch_size", training.get("batch_size"))
        batch = (
            local * degrees.get("dp_replicate", 1) * degrees["dp_shard"]
            if isinstance(local, int) and "dp_shard" in degrees
            else None
        )
    family = "-".join(str(x) for x in (model.get("name"), model.get("flavor")) if x) or None
    model_card = {
        "phase": "training",
        "model_family": family.lower() if family else None,
        "precision": _TORCH_DTYPES.get(str(training.get("mixed_precision_param", "")).lower()),
    }
    data = {"batch_size": batch, "seq_len": training.get("seq_len"), "dataset": training.get("dataset")}
    return {
        "description": job.get("description"),
        "workload": {
            "model": {k: v for k, v in model_card.items() if v is not None},
            "data": {k: v for k, v in data.items() if v is not None},
        },
        "Model-executor": {"framework": {"name": "torchtitan"}, "model_plan_parallelization": degrees},
    }


def read_card_document(path: Path) -> dict[str, Any]:
    """The card file as written (YAML or TOML), before any mapping: at most
    ``MAX_CARD_BYTES``, YAML without aliases."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CARD_BYTES + 1)
    except OSError as e:
        raise ValueError(f"cannot read: {e.strerror or e}") from e
    if len(data) > MAX_CARD_BYTES:
        raise ValueError(f"larger than {MAX_CARD_BYTES >> 20} MB: not a workload card")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text: {e.reason} at byte {e.start}") from e
    if path.suffix == ".toml":
        return _bounded(_read_toml(text))
    # Without an anchor ("&") there can be no alias: libyaml's C loader, 10x faster than
    # the Python one (a 400-workload ingest read 400 cards); with one, the Python loader
    # that refuses aliases.
    import yaml

    loader = _card_loader() if "&" in text else getattr(yaml, "CSafeLoader", _card_loader())
    try:
        card = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader (or its C twin)
    except yaml.YAMLError as e:
        raise ValueError(f"invalid YAML: {str(e).splitlines()[0]}") from e
    except RecursionError as e:
        raise ValueError(f"nested deeper than {MAX_CARD_DEPTH} levels: not a workload card") from e
    if card is None:
        return {}
    if not isinstance(card, dict):
        raise ValueError("a workload card must be a YAML mapping")
    return _bounded(card)


def _bounded(doc: dict[str, Any]) -> dict[str, Any]:
    if card_depth(doc) > MAX_CARD_DEPTH:
        raise ValueError(f"nested deeper than {MAX_CARD_DEPTH} levels: not a workload card")
    return doc


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


def load_card(path: Path) -> dict[str, Any]:
    """Parses a card (YAML, or TOML in either form); raises ``ValueError`` with a
    readable reason if it is not one."""
    doc = read_card_document(path)
    if path.suffix == ".toml" and is_torchtitan_config(doc):
        return card_from_torchtitan(doc)
    return doc


def card_table(trace: str, card: dict[str, Any]) -> pa.Table:
    row: dict[str, Any] = {"trace": trace, "card_json": json.dumps(_finite(card), default=str)}
    for name, path, kind in CARD_FIELDS:
        row[name] = _convert(_dig(card, path), kind)
    return pa.Table.from_pylist([row], schema=CARD_SCHEMA)
