"""PyTorch execution traces (``ExecutionTraceObserver`` JSON, and Chakra's JSON form of it).

An execution trace (ET) is the graph of operators one rank ran: every node with its
parent, its ``rf_id`` (the record-function id Kineto writes as ``Record function id`` on
the same op, which is how the two traces link), its op schema, and its inputs and outputs
with exact tensor shapes, element types and sizes. cclq streams the ``nodes`` array with
ijson (an ET is one JSON object, tens of MB on real models) into two tables:

``et_nodes``   one row per node: ids, name, schema, rf_id, thread, the inputs/outputs as
               JSON text, the attributes, and what ``record_param_comms`` nodes say about
               their collective (name, dtype, msg nelems, split sizes, process group),
               plus the bytes of the node's input and output tensors
``et_tensors`` one row per tensor argument: (node, input|output, position, index within a
               tensor list), tensor and storage ids, offset, numel, item size, device,
               shape and type

Both layouts are read: schema 1.0.1 (``parent``, ``inputs`` / ``input_shapes`` /
``input_types`` and the ids as keys of the node) and 1.0.2+ / Chakra (``ctrl_deps``,
``inputs: {values, shapes, types}``, ``attrs: [{name, type, value}]``). A tensor value is
``[tensor_id, storage_id, offset, numel, itemsize, device]``. In 1.0.1 a
``record_param_comms`` node lists (tensor, seq, pg, rank, collective name, in splits, out
splits) as its inputs; newer ones carry ``collective_name`` etc. as attributes.

The bounds of every JSON reader hold (``cclq.formats.limits``): the structural scan runs
over the text before ijson does, so nesting past ``--max-depth``, a string past
``--max-string-mb`` or one node past ``--max-event-mb`` fails the file in seconds and flat
memory (ijson's objects for a node take ~50 times its text).
"""

from __future__ import annotations

from decimal import Decimal
from itertools import repeat
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

import ijson
import pyarrow as pa

from cclq.errors import TraceFileError
from cclq.formats.base import (
    BatchSink,
    Detected,
    Prepared,
    ProgressFn,
    ReadOptions,
    ReadResult,
    record_batch,
)
from cclq.formats.chrome.ijson_reader import parse_error_message, scan_top_level_keys
from cclq.formats.chrome.jsonscan import bounds_check
from cclq.formats.limits import DEFAULT_LIMITS, LimitExceeded, number_too_long
from cclq.formats.source import Source, gzip_errors, read_tail
from cclq.schema import ET_NODE_SCHEMA, ET_TENSOR_SCHEMA

BATCH_ROWS = 8192

_COLUMN_ATTRS = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema")
_COMM_ATTRS = (
    "collective_name",
    "dtype",
    "in_msg_nelems",
    "out_msg_nelems",
    "in_split_size",
    "out_split_size",
    "pg_name",
    "pg_desc",
    "pg_size",
)
_META_KEYS = ("schema", "pid", "time", "start_ts", "finish_ts")


def _int(v: Any) -> int | None:
    if type(v) is int:
        return v
    if isinstance(v, (float, Decimal)) and v == int(v):
        return int(v)
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return None
    return None


def _json_default(o: Any) -> Any:
    return float(o) if isinstance(o, Decimal) else str(o)


# The text json.dumps(v, default=_json_default) writes (ASCII, ", " and ": "), from one C
# encoder built once: json.dumps builds a new encoder on every call with a ``default``,
# which cost more than the encoding of a node's small lists (a third of the reader's time).
_encode = c_make_encoder(None, _json_default, encode_basestring_ascii, None, ": ", ", ", False, False, True)


def _json(v: Any) -> str | None:
    if v is None:
        return None
    return "".join(_encode(v, 0))


def _is_tensor(value: Any) -> bool:
    return type(value) is list and len(value) == 6 and all(type(x) is int for x in value[:5]) and type(value[5]) is str


class _Node:
    """One node in the common shape of both layouts."""

    __slots__ = (
        "raw",
        "attrs",
        "inputs",
        "input_shapes",
        "input_types",
        "outputs",
        "output_shapes",
        "output_types",
        "parent",
    )

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        if isinstance(raw.get("inputs"), dict) or "attrs" in raw:  # 1.0.2+ / Chakra
            self.attrs = {a.get("name"): a.get("value") for a in raw.get("attrs") or [] if isinstance(a, dict)}
            ins, outs = raw.get("inputs") or {}, raw.get("outputs") or {}
            self.inputs, self.input_shapes, self.input_types = ins.get("values"), ins.get("shapes"), ins.get("types")
            self.outputs, self.output_shapes, self.output_types = (
                outs.get("values"),
                outs.get("shapes"),
                outs.get("types"),
            )
            self.parent = raw.get("ctrl_deps")
        else:  # 1.0.1: flat
            self.attrs = {k: raw[k] for k in _COLUMN_ATTRS if k in raw}
            self.inputs, self.input_shapes, self.input_types = (
                raw.get("inputs"),
                raw.get("input_shapes"),
                raw.get("input_types"),
            )
            self.outputs, self.output_shapes = raw.get("outputs"), raw.get("output_shapes")
            self.output_types = raw.get("output_types")
            self.parent = raw.get("parent")


def _tensors(values: Any, shapes: Any, types: Any) -> list[tuple[int, int | None, list, Any, Any]]:
    """(position, index within a tensor list, tensor value, shape, type) of every tensor
    argument. Tensor lists may nest (``GenericList[GenericList[Tensor]]``, what an
    all_gather outputs): their tensors are numbered in order, depth first."""
    out: list[tuple[int, int | None, list, Any, Any]] = []
    if type(values) is not list:
        return out
    shapes = shapes if type(shapes) is list else []
    types = types if type(types) is list else []

    def walk(pos: int, value: Any, shape: Any, typ: Any, depth: int, counter: list[int]) -> None:
        if _is_tensor(value):
            out.append((pos, counter[0] if depth else None, value, shape, typ))
            counter[0] += 1
        elif type(value) is list and depth < 8:
            for i, v in enumerate(value):
                walk(pos, v, shape[i] if type(shape) is list and i < len(shape) else None, typ, depth + 1, counter)

    for pos, value in enumerate(values):
        walk(pos, value, shapes[pos] if pos < len(shapes) else None, types[pos] if pos < len(types) else None, 0, [0])
    return out


def _shape(value: Any) -> list[int] | None:
    return value if type(value) is list and all(type(x) is int for x in value) else None


class EtReader:
    """PyTorch execution traces (``detect`` kind ``pytorch_et``)."""

    name = f"pytorch_et/ijson-{ijson.backend}"
    tables = ("et_nodes", "et_tensors")
    NODE_DEPTH = 3  # {"nodes": [ {node} ]}: a node is an "event" of the structural scan

    def __init__(self, options: ReadOptions | None = None) -> None:
        self.limits = options.limits if options is not None else DEFAULT_LIMITS

    def prepare(self, path: str, detected: Detected) -> Prepared:
        meta = scan_top_level_keys(detected.head, last=False, keys=_META_KEYS)
        if "finish_ts" not in meta:
            meta.update(
                {
                    k: v
                    for k, v in scan_top_level_keys(read_tail(path, 1 << 16), last=True, keys=_META_KEYS).items()
                    if k not in meta
                }
            )
        return Prepared(metadata={"top_level": meta})

    def read(
        self,
        path: str,
        detected: Detected,
        prepared: Prepared,
        file_id: str,
        sinks: dict[str, BatchSink],
        progress: ProgressFn | None,
    ) -> ReadResult:
        result = ReadResult()
        result.metadata["execution_trace"] = prepared.metadata["top_level"]
        nodes: list[dict[str, Any]] = []
        tensors: list[dict[str, Any]] = []

        def flush() -> None:
            if nodes:
                sinks["et_nodes"](record_batch(ET_NODE_SCHEMA, _columns(nodes, ET_NODE_SCHEMA), len(nodes)))
                result.rows_written += len(nodes)
                nodes.clear()
            if tensors:
                sinks["et_tensors"](record_batch(ET_TENSOR_SCHEMA, _columns(tensors, ET_TENSOR_SCHEMA), len(tensors)))
                tensors.clear()

        idx = -1
        limits = self.limits
        with Source(
            path,
            progress,
            limits=limits,
            check=lambda compressed: bounds_check(path, limits, self.NODE_DEPTH, compressed),
        ) as source:
            try:
                for raw in ijson.items(source.stream, "nodes.item"):
                    idx += 1
                    if type(raw) is not dict or _int(raw.get("id")) is None:
                        result.drops["not a node (no id)", ""] += 1
                        continue
                    nodes.append(self._node_row(file_id, idx, _Node(raw), tensors))
                    if len(nodes) >= BATCH_ROWS:
                        flush()
            except LimitExceeded:
                raise
            except ijson.JSONError as e:
                raise TraceFileError(path, parse_error_message(e, source)) from e
            except gzip_errors() as e:
                raise TraceFileError(path, f"corrupt gzip stream: {e}") from e
            except ValueError as e:  # ijson converting an integer of more than 4300 digits
                if "digits" in str(e):
                    raise number_too_long(path) from e
                raise
            flush()
            result.content_hash = source.finish_hash()
            result.decompressed_bytes = source.stream.offset
        result.events_read = idx + 1
        if idx < 0:
            raise TraceFileError(path, "an execution trace without nodes")
        return result

    def _node_row(self, file_id: str, idx: int, node: _Node, tensors: list[dict[str, Any]]) -> dict[str, Any]:
        raw, attrs = node.raw, node.attrs
        node_id = _int(raw.get("id"))
        sizes = {}
        for role, values, shapes, types in (
            ("input", node.inputs, node.input_shapes, node.input_types),
            ("output", node.outputs, node.output_shapes, node.output_types),
        ):
            total = 0
            for pos, sub, value, shape, typ in _tensors(values, shapes, types):
                tid, sid, offset, numel, itemsize, device = value
                total += numel * itemsize
                tensors.append(
                    {
                        "file_id": file_id,
                        "node_id": node_id,
                        "role": role,
                        "position": pos,
                        "list_index": sub,
                        "tensor_id": tid,
                        "storage_id": sid,
                        "storage_offset": offset,
                        "numel": numel,
                        "itemsize": itemsize,
                        "device": device,
                        "shape": _shape(shape),
                        "type": typ if type(typ) is str else None,
                    }
                )
            sizes[role] = total
        row: dict[str, Any] = {
            "file_id": file_id,
            "node_idx": idx,
            "node_id": node_id,
            "parent_id": _int(node.parent),
            "name": raw.get("name") if type(raw.get("name")) is str else None,
            "op_schema": attrs.get("op_schema") if type(attrs.get("op_schema")) is str else None,
            "inputs": _json(node.inputs),
            "input_shapes": _json(node.input_shapes),
            "input_types": _json(node.input_types),
            "outputs": _json(node.outputs),
            "output_shapes": _json(node.output_shapes),
            "output_types": _json(node.output_types),
            "input_bytes": sizes["input"],
            "output_bytes": sizes["output"],
        }
        for key in ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid"):
            row[key] = _int(attrs.get(key))
        for key in _COMM_ATTRS:
            attr = attrs.get(key)
            if key in ("in_msg_nelems", "out_msg_nelems", "pg_size"):
                row[key] = _int(attr)
            elif attr is not None:
                row[key] = attr if type(attr) is str else _json(attr)
        if row["name"] == "record_param_comms" and row.get("collective_name") is None and type(node.inputs) is list:
            # 1.0.1: (tensor, seq, pg, rank, collective name, in splits, out splits)
            strings = [v for v in node.inputs if type(v) is str and not v.startswith("<")]
            if strings:
                row["collective_name"] = strings[0]
            ints = [v for v in node.inputs if type(v) is int]
            if len(ints) >= 3:
                row["comm_rank"] = ints[2]
            lists = [v for v in node.inputs if type(v) is list and not _is_tensor(v)]
            if len(lists) >= 2:
                row["in_split_size"], row["out_split_size"] = _json(lists[-2]), _json(lists[-1])
        rest = {k: v for k, v in attrs.items() if k not in _COLUMN_ATTRS and k not in _COMM_ATTRS}
        row["attrs"] = _json(rest) if rest else None
        return row


def _columns(rows: list[dict[str, Any]], schema: pa.Schema) -> dict[str, list[Any]]:
    # dict.get mapped in C over the rows: a row has only the keys it sets
    return {f.name: list(map(dict.get, rows, repeat(f.name))) for f in schema}
