"""``cclq cards check``: a workload card against the structure CCL-Bench's template implies.

The template (``workload_card_template.yaml``) says which sections exist, what each field
holds and, in its comments, the values some fields take. A card is checked for:

* required fields: ``version``, ``description``, ``workload.model.phase``,
  ``workload.hardware.xpu_spec.type`` and ``.total_count`` (the device count metrics
  read as ``n_chips``), and ``metric_source.traces`` (CCL-Bench's tools pick their
  reader from it);
* types: counts are whole numbers >= 1 (a ``"4"`` in quotes, ``4.5`` or ``0`` is
  reported), parameter counts are positive numbers (PyYAML reads ``8.03e9`` as text:
  YAML 1.1 wants ``8.03e+9``), lists are lists, a library version is text (``2.20``
  unquoted becomes the number 2.2);
* known values: ``phase`` (training, inference, serving), ``precision``,
  ``granularity``;
* consistency: the parallelism factors ``dp_replicate x dp_shard x tp x pp x cp``
  multiply to ``total_count`` (torchtitan's rule; factors the card leaves out count
  as 1, and the check runs when the card gives at least one); ``ep`` divides the
  device count and needs ``moe: true`` (expert parallelism without experts is a
  mislabelled field); ``count_per_node`` divides ``total_count``; and, when the folder
  also holds torchtitan's ``workload.toml``, its degrees, sequence length and
  batch agree with the card's;
* misspelled keys: an unknown key close to a template key (``Model_executor``, ``tpp``)
  is reported, since its value would be silently lost. Other extra keys are fine (real
  cards add ``collection_notes``, ``xpu_spec.topology``, ``num_params_active`` ...).

Each problem is one ``CardProblem`` naming the file and the dotted field.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cclq.cards.load import (
    TOML_CARD_FILE,
    TORCHTITAN_PARALLELISM,
    is_torchtitan_config,
    load_card,
    read_card_document,
)

PHASES = ("training", "inference", "serving")
GRANULARITIES = ("model_fwd_bwd_pass", "model_fwd", "layer", "kernel")
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp4", "int8", "int4", "mixed")
# spellings people use for the template's precision values
_PRECISION_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
}
# dp_replicate x dp_shard x tp x pp x cp = devices (ep and pp_mb do not multiply)
WORLD_FACTORS = ("dp_replicate", "dp_shard", "tp", "pp", "cp")


@dataclass(frozen=True)
class CardProblem:
    path: str
    field: str  # dotted path in the card, or "-" for the file as a whole
    problem: str

    def line(self) -> str:
        return f"{self.path}: {self.field}: {self.problem}"


@dataclass(frozen=True)
class Field:
    """A leaf of the template: its kind (see ``_check_kind``), values, whether required."""

    kind: str
    required: bool = False
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    fields: dict[str, Field | Section] = field(default_factory=dict)
    required: bool = False


_COUNT = Field("count")
_TEXT = Field("text")
TEMPLATE = Section(
    {
        "version": Field("count", required=True),
        "description": Field("text", required=True),
        "hf_url": _TEXT,
        "trace_url": _TEXT,
        "contributor": _TEXT,
        "contact": _TEXT,
        "workload": Section(
            {
                "model": Section(
                    {
                        "phase": Field("enum", required=True, values=PHASES),
                        "moe": Field("bool"),
                        "granularity": Field("enum", values=GRANULARITIES),
                        "model_family": _TEXT,
                        "precision": Field("precision", values=PRECISIONS),
                        "epochs": _COUNT,
                        "iteration": _COUNT,
                        "model_arch": Section(
                            {
                                "num_params": Field("amount"),
                                "num_params_embedding": Field("amount"),
                                "num_params_active": Field("amount"),
                                "num_layers": _COUNT,
                                "num_heads": _COUNT,
                                "head_dim": _COUNT,
                            }
                        ),
                    },
                    required=True,
                ),
                "data": Section(
                    {
                        "batch_size": _COUNT,
                        "seq_len": _COUNT,
                        "input_len": _COUNT,
                        "output_len": _COUNT,
                        "dataset": _TEXT,
                    }
                ),
                "hardware": Section(
                    {
                        "network_topo": Section({"topology": _TEXT, "bandwidth_gbps": Field("bandwidths")}),
                        "xpu_spec": Section(
                            {
                                "type": Field("text", required=True),
                                "model": _TEXT,
                                "total_count": Field("count", required=True),
                                "count_per_node": _COUNT,
                            },
                            required=True,
                        ),
                        "driver_version": Field("version"),
                    },
                    required=True,
                ),
            },
            required=True,
        ),
        "Model-executor": Section(
            {
                "framework": Section({"name": _TEXT, "compiler_tool_selection": _TEXT}),
                "model_plan_parallelization": Section({k: _COUNT for k in (*WORLD_FACTORS, "ep", "pp_mb")}),
                "communication_library": Section({"name": _TEXT, "version": Field("version"), "env": Field("mapping")}),
                "protocol_selection": Field("texts"),
            }
        ),
        "metric_source": Section(
            {
                "traces": Field("texts", required=True),
                "metrics_specific_trace": Field("texts"),
            },
            required=True,
        ),
    }
)


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"text {value!r}"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_kind(spec: Field, value: Any) -> str | None:
    """What is wrong with a given (non-null) value, or None."""
    kind = spec.kind
    if kind == "text":
        return (
            None
            if isinstance(value, (str, int, float)) and not isinstance(value, bool)
            else f"must be text, got {_describe(value)}"
        )
    if kind == "count":
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return f"must be a number, got text {value!r} (drop the quotes)"
        if not _is_number(value):
            return f"must be a whole number >= 1, got {_describe(value)}"
        if not float(value).is_integer():
            return f"must be a whole number, got {value!r}"
        return None if value >= 1 else f"must be >= 1, got {value!r}"
    if kind == "amount":
        if isinstance(value, str):
            hint = " (YAML 1.1 reads 8.03e9 as text: write 8.03e+9 or the integer)" if "e" in value.lower() else ""
            return f"must be a number, got text {value!r}{hint}"
        if not _is_number(value) or value <= 0:
            return f"must be a positive number, got {_describe(value)}"
        return None
    if kind == "bool":
        return None if isinstance(value, bool) else f"must be true or false, got {_describe(value)}"
    if kind == "enum":
        if not isinstance(value, str) or value not in spec.values:
            return f"{_describe(value)} is not one of {', '.join(spec.values)}"
        return None
    if kind == "precision":
        if not isinstance(value, str):
            return f"must be text such as bf16, got {_describe(value)}"
        low = value.strip().lower()
        if low in _PRECISION_ALIASES:
            return f"{value!r} is spelled {_PRECISION_ALIASES[low]!r} in the template"
        return None if low in spec.values else f"{value!r} is not a known precision ({', '.join(spec.values)})"
    if kind == "version":
        if isinstance(value, float):
            return f'is the number {value!r}; quote it ("...") so it stays as written (2.20 would become 2.2)'
        return (
            None
            if isinstance(value, (str, int)) and not isinstance(value, bool)
            else f"must be text, got {_describe(value)}"
        )
    if kind == "texts":
        if not isinstance(value, list):
            return f"must be a list, got {_describe(value)}"
        bad = [v for v in value if v is not None and not isinstance(v, str)]
        return f"must list text entries, got {_describe(bad[0])}" if bad else None
    if kind == "mapping":
        return None if isinstance(value, dict) else f"must be a mapping of NAME: value, got {_describe(value)}"
    if kind == "bandwidths":
        if not isinstance(value, list):
            return f"must be a list [scale-out, scale-up] in Gbps, got {_describe(value)}"
        if len(value) > 2:
            return f"must have at most 2 entries (scale-out, scale-up), got {len(value)}"
        for v in value:
            if v is None or (isinstance(v, str) and v.strip().upper() == "N/A"):
                continue
            if not _is_number(v) or v <= 0:  # 0 Gbps is no link: every utilisation over it is NULL
                return f"entries must be numbers > 0 (or N/A), got {_describe(v)}"
        return None
    raise AssertionError(f"unknown field kind {kind}")


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, list) and all(v is None for v in value))


def _walk(section: Section, node: dict[str, Any], prefix: str, out: list[tuple[str, str]]) -> None:
    for key, spec in section.fields.items():
        name = f"{prefix}{key}"
        value = node.get(key)
        if isinstance(spec, Section):
            if value is None:
                if spec.required:
                    out.append((name, "missing (a required section)"))
                continue
            if not isinstance(value, dict):
                out.append((name, f"must be a section (a mapping), got {_describe(value)}"))
                continue
            _walk(spec, value, name + ".", out)
        elif _is_empty(value):
            if spec.required:
                out.append((name, "missing (a required field)"))
        elif (problem := _check_kind(spec, value)) is not None:
            out.append((name, problem))
    for key in node:
        if key in section.fields or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, list(section.fields), n=1, cutoff=0.75)
        if close and close[0] not in node:
            out.append((f"{prefix}{key}", f"unknown field; did you mean {close[0]!r}? (its value is ignored)"))


def _get(card: dict[str, Any], dotted: str) -> Any:
    node: Any = card
    for step in dotted.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def _good_count(value: Any) -> int | None:
    return int(value) if _is_number(value) and float(value).is_integer() and value >= 1 else None


_PLAN = "Model-executor.model_plan_parallelization"
_TOTAL = "workload.hardware.xpu_spec.total_count"


def _consistency(card: dict[str, Any], out: list[tuple[str, str]]) -> None:
    total = _good_count(_get(card, _TOTAL))
    plan = _get(card, _PLAN)
    plan = plan if isinstance(plan, dict) else {}
    factors = {k: _good_count(plan.get(k)) for k in WORLD_FACTORS if plan.get(k) is not None}
    counts = [v for v in factors.values() if v is not None]
    if total is not None and factors and len(counts) == len(factors):
        product = math.prod(counts)
        if product != total:
            formula = " x ".join(f"{k} {v}" for k, v in factors.items())
            out.append((_PLAN, f"{formula} = {product} devices, but {_TOTAL} is {total}"))
    ep = _good_count(plan.get("ep"))
    if ep is not None and ep > 1:
        if total is not None and total % ep:
            out.append((f"{_PLAN}.ep", f"ep {ep} does not divide the {total} devices ({_TOTAL})"))
        if _get(card, "workload.model.moe") is False:
            out.append(
                (
                    f"{_PLAN}.ep",
                    f"ep {ep} is expert parallelism, but workload.model.moe is false "
                    "(without experts, set ep: 1 or moe: true)",
                )
            )
    per_node = _good_count(_get(card, "workload.hardware.xpu_spec.count_per_node"))
    if total is not None and per_node is not None and (per_node > total or total % per_node):
        out.append(
            (
                "workload.hardware.xpu_spec.count_per_node",
                f"{per_node} per node does not divide the {total} devices ({_TOTAL})",
            )
        )


def _against_torchtitan(card: dict[str, Any], toml_path: Path, out: list[tuple[str, str]]) -> None:
    """The card against torchtitan's job config beside it (``workload.toml``)."""
    try:
        doc = read_card_document(toml_path)
    except ValueError as e:
        out.append((f"({toml_path.name})", f"cannot be read to compare with the card: {e}"))
        return
    if not is_torchtitan_config(doc):
        return
    parallelism = doc.get("parallelism") or {}
    plan = _get(card, _PLAN)
    plan = plan if isinstance(plan, dict) else {}
    for key, card_key in TORCHTITAN_PARALLELISM.items():
        theirs, ours = parallelism.get(key), plan.get(card_key)
        if isinstance(theirs, int) and theirs >= 1 and ours is not None and ours != theirs:
            out.append((f"{_PLAN}.{card_key}", f"{ours!r} here, but {toml_path.name} says {key} = {theirs}"))
    seq = (doc.get("training") or {}).get("seq_len")
    ours = _get(card, "workload.data.seq_len")
    if isinstance(seq, int) and ours is not None and ours != seq:
        out.append(("workload.data.seq_len", f"{ours!r} here, but {toml_path.name} says training.seq_len = {seq}"))


def check_card_document(card: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) pairs for a parsed card."""
    out: list[tuple[str, str]] = []
    _walk(TEMPLATE, card, "", out)
    _consistency(card, out)
    return out


def check_card_file(path: Path, card: dict[str, Any] | None = None) -> list[CardProblem]:
    """Every problem of one card file (YAML, or TOML in either form); ``card``: the file
    as ``load_card`` already read it (ingest has: parsing it again cost 5 ms a workload)."""
    if card is None:
        try:
            card = load_card(path)
        except ValueError as e:
            return [CardProblem(str(path), "-", str(e))]
    pairs = check_card_document(card)
    toml = path.parent / TOML_CARD_FILE
    if path.suffix != ".toml" and toml.is_file():
        _against_torchtitan(card, toml, pairs)
    return [CardProblem(str(path), f, p) for f, p in pairs]


@dataclass
class CheckReport:
    cards: list[Path] = field(default_factory=list)  # the card files checked
    without_card: list[Path] = field(default_factory=list)  # workload folders that have none
    problems: list[CardProblem] = field(default_factory=list)
