"""The one event schema every reader writes, and the table of promoted arguments.

Every trace format is normalised to the same columns (see ``EVENT_SCHEMA``). Readers
produce batches of ``EVENT_SCHEMA``; the writer puts ``trace`` and ``rank`` in front
(``data_file_schema``), so every data file says which trace and rank its rows belong
to, whatever its path (a compacted file holds many ranks, and a trace id such as
``NULL`` must not depend on how a tool parses a folder name).

``PROMOTED_ARGS`` is the declarative mapping from a raw ``args`` key to a typed
column that also holds its value (``args`` keeps every key as written) (the idea of HTA's
``event_args`` YAML, kept in code so it is versioned with ``INGEST_VERSION``). Adding a key
here is a schema change: bump ``INGEST_VERSION`` so that ``cclq ingest`` rewrites old partitions.

``as_type`` puts a column in its schema type without loading ``pyarrow.compute`` where it
already has it (the catalog reader, the critical path, a metric's catalog rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# Bump when the meaning or shape of a column changes; files ingested by an older
# version are re-ingested automatically.
# 3: trace and rank columns in every data file; 4: args as written; 5: args with one value
# per key and numbers as the reference parse writes them (docs/schema.md)
INGEST_VERSION = 5

# Columns that every row carries, in file order.
BASE_FIELDS: list[pa.Field] = [
    pa.field("file_id", pa.string()),  # id of the source file (files.file_id)
    pa.field("event_idx", pa.int64()),  # position in the source's event array
    pa.field("ph", pa.string()),  # Chrome phase (B/E pairs become one 'B' row)
    pa.field("cat", pa.string()),  # category, legacy names mapped to today's
    pa.field("cat_raw", pa.string()),  # original category when it was mapped
    pa.field("name", pa.string()),
    pa.field("pid", pa.string()),  # kept as text: pids can be strings ("Spans")
    pa.field("tid", pa.string()),
    pa.field("ts_ns", pa.int64()),  # exact ns; epoch ns when the file has a base
    pa.field("dur_ns", pa.int64()),  # NULL for instants, flows, metadata, open B
    pa.field("flow_id", pa.string()),  # 'id' of s/t/f flow and async events
    pa.field("bp", pa.string()),  # flow binding point ('e' = enclosing slice)
    pa.field("scope", pa.string()),  # instant scope 's' (g/p/t)
    pa.field("args", pa.string()),  # the args as written: compact source JSON, every key kept
]


@dataclass(frozen=True)
class PromotedArg:
    """One raw ``args`` key copied into a typed column."""

    column: str
    kind: str  # "int", "float", "str" or "int_list"
    doc: str


_ARROW_TYPES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
    "int_list": pa.list_(pa.int64()),
}

# raw arg key -> promoted column. Several raw spellings may share one column.
PROMOTED_ARGS: dict[str, PromotedArg] = {
    # -- GPU activity (Kineto) --
    "device": PromotedArg("device", "int", "GPU device index"),
    "stream": PromotedArg("stream", "int", "CUDA/HIP stream id"),
    "correlation": PromotedArg("correlation", "int", "CUPTI correlation id (launch <-> kernel)"),
    "External id": PromotedArg("external_id", "int", "link to the CPU op / annotation"),
    "external id": PromotedArg("external_id", "int", "legacy spelling of External id"),
    "bytes": PromotedArg("bytes", "int", "memcpy/memset bytes"),
    "memory bandwidth (GB/s)": PromotedArg("memory_bw_gbps", "float", "Kineto memcpy bandwidth"),
    "grid": PromotedArg("grid", "int_list", "kernel grid [x, y, z]"),
    "block": PromotedArg("block", "int_list", "kernel block [x, y, z]"),
    "blocks per SM": PromotedArg("blocks_per_sm", "float", "grid blocks / SM count"),
    "warps per SM": PromotedArg("warps_per_sm", "float", "warps per SM"),
    "est. achieved occupancy %": PromotedArg("occupancy_pct", "float", "estimated occupancy, %"),
    "registers per thread": PromotedArg("registers_per_thread", "int", "registers per thread"),
    "shared memory": PromotedArg("shared_memory_bytes", "int", "static + dynamic shared memory"),
    # -- CPU-side ids (linking ops to execution traces and Python call stacks)
    "Ev Idx": PromotedArg("ev_idx", "int", "event index, joins PyTorch execution traces"),
    "Record function id": PromotedArg("record_function_id", "int", "record_function id (ET rf_id)"),
    "Python id": PromotedArg("python_id", "int", "python_function id"),
    "Python parent id": PromotedArg("python_parent_id", "int", "parent python_function id"),
    "Sequence number": PromotedArg("sequence_number", "int", "autograd sequence number (fwd <-> bwd)"),
    # -- collectives (copied by PyTorch from record_param_comms onto the kernel) --
    "Collective name": PromotedArg("collective_name", "str", "c10d collective name"),
    "In msg nelems": PromotedArg("in_msg_nelems", "int", "input message elements"),
    "Out msg nelems": PromotedArg("out_msg_nelems", "int", "output message elements"),
    "Group size": PromotedArg("group_size", "int", "ranks in the process group"),
    "dtype": PromotedArg("dtype", "str", "element type (Float, BFloat16, ...)"),
    "Process Group Name": PromotedArg("pg_name", "str", "process group name"),
    "Process Group Description": PromotedArg("pg_desc", "str", "process group description"),
    "Process Group Ranks": PromotedArg("pg_ranks", "str", "ranks of the group (text, may be truncated)"),
    "Seq": PromotedArg("seq", "int", "c10d sequence number within the group"),
    "In split size": PromotedArg("in_split_size", "str", "all_to_allv input splits (text)"),
    "Out split size": PromotedArg("out_split_size", "str", "all_to_allv output splits (text)"),
    # -- XLA / xprof (all strings in the trace-viewer JSON) --
    "hlo_op": PromotedArg("hlo_op", "str", "HLO instruction name"),
    "hlo_module": PromotedArg("hlo_module", "str", "HLO module name"),
    "hlo_category": PromotedArg("hlo_category", "str", "xprof op category"),
    "long_name": PromotedArg("long_name", "str", "full HLO text"),
    "flops": PromotedArg("flops", "float", "op FLOPs"),
    "model_flops": PromotedArg("model_flops", "float", "model FLOPs of the op"),
    "bytes_accessed": PromotedArg("bytes_accessed", "int", "bytes accessed"),
    "raw_bytes_accessed": PromotedArg("raw_bytes_accessed", "int", "raw bytes accessed"),
    "shape_with_layout": PromotedArg("shape_with_layout", "str", "result shape, e.g. bf16[8,128]{1,0}"),
    "device_duration_ps": PromotedArg("device_duration_ps", "int", "device time in picoseconds"),
    "group_id": PromotedArg("group_id", "int", "step group id"),
    "step_num": PromotedArg("step_num", "int", "step number"),
    "run_id": PromotedArg("run_id", "int", "XLA run id"),
    "program_id": PromotedArg("program_id", "int", "XLA program id"),
}


def promoted_columns() -> list[tuple[str, str]]:
    """Distinct promoted (column, kind) pairs in declaration order."""
    seen: dict[str, str] = {}
    for spec in PROMOTED_ARGS.values():
        seen.setdefault(spec.column, spec.kind)
    return list(seen.items())


PROMOTED_FIELDS: list[pa.Field] = [pa.field(column, _ARROW_TYPES[kind]) for column, kind in promoted_columns()]

EVENT_SCHEMA = pa.schema(BASE_FIELDS + PROMOTED_FIELDS)

# The columns every data file of every table starts with (the writer adds them).
PARTITION_FIELDS: list[pa.Field] = [pa.field("trace", pa.string()), pa.field("rank", pa.int32())]


def data_file_schema(schema: pa.Schema) -> pa.Schema:
    """A reader's batch schema as stored: ``trace`` and ``rank`` first."""
    return pa.schema(PARTITION_FIELDS + list(schema))


# PyTorch execution traces (cclq/formats/et.py): a row per graph node, a row per tensor.
ET_NODE_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("node_idx", pa.int64()),  # position in the nodes array
        ("node_id", pa.int64()),
        ("parent_id", pa.int64()),  # parent (1.0.1) / ctrl_deps (1.0.2+)
        ("name", pa.string()),
        ("op_schema", pa.string()),
        ("rf_id", pa.int64()),  # = Kineto's `Record function id` on the same op
        ("fw_parent", pa.int64()),
        ("seq_id", pa.int64()),
        ("scope", pa.int64()),
        ("tid", pa.int64()),
        ("fw_tid", pa.int64()),
        ("inputs", pa.string()),  # JSON: the input values
        ("input_shapes", pa.string()),
        ("input_types", pa.string()),
        ("outputs", pa.string()),
        ("output_shapes", pa.string()),
        ("output_types", pa.string()),
        ("attrs", pa.string()),  # JSON: every attribute not in a column
        ("input_bytes", pa.int64()),  # sum of numel x itemsize over the input tensors
        ("output_bytes", pa.int64()),
        ("collective_name", pa.string()),  # record_param_comms: the collective
        ("dtype", pa.string()),
        ("in_msg_nelems", pa.int64()),
        ("out_msg_nelems", pa.int64()),
        ("in_split_size", pa.string()),
        ("out_split_size", pa.string()),
        ("pg_name", pa.string()),
        ("pg_desc", pa.string()),
        ("pg_size", pa.int64()),
        ("comm_rank", pa.int64()),  # the rank a 1.0.1 record_param_comms names
    ]
)

ET_TENSOR_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("node_id", pa.int64()),
        ("role", pa.string()),  # input | output
        ("position", pa.int32()),  # argument position (0-based)
        ("list_index", pa.int32()),  # index within a tensor list, NULL for a single tensor
        ("tensor_id", pa.int64()),
        ("storage_id", pa.int64()),
        ("storage_offset", pa.int64()),  # elements from the storage start
        ("numel", pa.int64()),
        ("itemsize", pa.int64()),
        ("device", pa.string()),
        ("shape", pa.list_(pa.int64())),
        ("type", pa.string()),  # e.g. Tensor(float), Tensor(c10::BFloat16)
    ]
)


# Benchmark result files (cclq/formats/results.py): one row per measurement and metric.
RESULTS_SCHEMA = pa.schema(
    [
        ("file_id", pa.string()),
        ("row_idx", pa.int64()),
        ("source_format", pa.string()),  # ddlb_csv | ddl_benchmarks_log | vllm_bench_json | sglang_bench_jsonl
        ("benchmark", pa.string()),  # ddlb, the model of a ddl-benchmarks run, vllm bench latency, the serving backend
        ("implementation", pa.string()),  # DDLB's implementation label, the served model
        ("metric", pa.string()),  # mean_time_ms, total_samples_per_s, median_ttft_ms, ttft_s, ...
        ("value", pa.float64()),
        ("unit", pa.string()),  # ms, s, TFLOPS, img/s, tokens/s, tokens, ... (NULL: a count or unknown)
        ("run", pa.int64()),  # the measurement it belongs to: a CSV row, a log's try, a JSONL line
        ("item", pa.int64()),  # within the run: the iteration or request; NULL for an aggregate
        ("dtype", pa.string()),
        ("world_size", pa.int64()),
        ("batch_size", pa.int64()),
        ("m", pa.int64()),
        ("n", pa.int64()),
        ("k", pa.int64()),
        ("valid", pa.bool_()),  # DDLB's validation verdict
        ("config_json", pa.string()),  # every configuration field of the source, as JSON
    ]
)


# Tables that readers fill, by name: the catalog's `parts` says which data file holds
# which input file's rows of which table; engine.connect makes a view of each.
TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "events": EVENT_SCHEMA,
    "et_nodes": ET_NODE_SCHEMA,
    "et_tensors": ET_TENSOR_SCHEMA,
    "results": RESULTS_SCHEMA,
}
# Tables whose rows belong to one rank: two files may not claim a (trace, rank) of one.
# Result files describe a whole workload and claim no rank.
RANKED_TABLES = ("events", "et_nodes", "et_tensors")

# Kineto before ~2022 wrote capitalised categories; map them to today's names and
# keep the original in ``cat_raw``.
LEGACY_CATEGORIES: dict[str, str] = {
    "Operator": "cpu_op",
    "Kernel": "kernel",
    "Runtime": "cuda_runtime",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "gpu_user_Annotation": "gpu_user_annotation",
    "User annotation": "user_annotation",
}


def as_type(values: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``values`` as ``type_``, cast only where the type differs: ``cast`` imports
    pyarrow.compute (46 ms of a cold board's lane time, 0.1-0.2 s of a command that
    would otherwise not load it)."""
    return values if values.type == type_ else values.cast(type_)
