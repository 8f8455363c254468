"""Benchmark result files: what a benchmark measured about itself, next to its traces.

Each file becomes rows of the ``results`` table, one per (measurement, metric), in long
form: ``metric``, ``value``, ``unit``, ``run`` (the CSV row, log try or JSONL line it came
from) and ``item`` (the iteration or request within it, NULL for an aggregate), the
benchmark and implementation, the configuration as typed columns where every source has
them (dtype, world size, batch size, m, n, k, valid) and all of it as ``config_json``.
Formats, recognised by content:

``ddlb_csv``            DDLB's results CSV (``implementation, mean_time (ms), std_time, ...,
                        valid``; what ``cclq record`` writes too): per row the time in ms
                        (mean, std, min, max) and the throughput in TFLOPS
``ddl_benchmarks_log``  ddl-benchmarks / Horovod / BytePS benchmark logs: ``Iter #i: X
                        img/sec per GPU``, ``Img/sec per GPU: X +-C``, ``Total img/sec on N
                        GPU(s): X +-C`` (``sen/sec`` for BERT), ``Model:``, ``Batch size:``,
                        ``Number of GPUs:``; each try of an appended log is a ``run``
``vllm_bench_json``     ``vllm bench latency`` (``avg_latency``, ``latencies``,
                        ``percentiles``) and ``vllm bench serve`` / benchmark_serving output
                        (``mean_ttft_ms``, ``median_tpot_ms``, ``output_throughput``,
                        ``ttfts``, ...)
``sglang_bench_jsonl``  SGLang ``bench_serving`` results, one JSON object per run and line

Numbers that are not numbers (a cell ``n/a``, a count of 5,000 digits) are counted, not
fatal, as are log lines no rule knows. The bounds of ``cclq.formats.limits`` hold: a line
past ``--max-event-mb``, a CSV cell past ``--max-string-mb`` or a header of more than
``--max-columns`` columns fails the file, in one line, before the row is built. A results
file belongs to its workload, not to a rank: its rows carry rank 0 and claim nothing.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import Any

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
from cclq.formats.limits import (
    DEFAULT_LIMITS,
    LimitExceeded,
    ReadLimits,
    cell_too_long,
    line_too_long,
    too_many_columns,
)
from cclq.formats.source import Source, gzip_errors
from cclq.schema import RESULTS_SCHEMA

DDLB_COLUMNS = {"implementation", "mean_time (ms)"}
_DDLB_METRICS = (  # column -> (metric, unit)
    ("mean_time (ms)", "mean_time_ms", "ms"),
    ("std_time", "std_time_ms", "ms"),
    ("min_time", "min_time_ms", "ms"),
    ("max_time", "max_time_ms", "ms"),
    ("Throughput (TFLOPS)", "throughput_tflops", "TFLOPS"),
    ("Throughput std (TFLOPS)", "throughput_std_tflops", "TFLOPS"),
)
_DDLB_TYPED = {"m", "n", "k", "dtype", "world_size", "valid", "implementation"}

_LOG_RULES = [  # (name, regex); see ddl-benchmarks' imagenet/bert benchmark scripts
    ("iter", re.compile(r"^Iter #(\d+): ([\d.eE+-]+) (img|sen)/sec per GPU")),
    ("per_gpu", re.compile(r"^(Img|Sen)/sec per GPU: ([\d.eE+-]+) \+-\s*([\d.eE+-]+)")),
    ("total", re.compile(r"^Total (img|sen)/sec on (\d+) GPU\(s\): ([\d.eE+-]+) \+-\s*([\d.eE+-]+)")),
    ("model", re.compile(r"^Model: (\S+)")),
    ("batch", re.compile(r"^Batch size: (\d+)")),
    ("gpus", re.compile(r"^Number of GPUs: (\d+)")),
    ("date", re.compile(r"^#Date: (.*)")),
    ("cmd", re.compile(r"^#CMD: (.*)")),
]
LOG_MARKERS = re.compile(
    rb"(?m)^(?:Total (?:img|sen)/sec on \d+ GPU|(?:Img|Sen)/sec per GPU: "
    rb"|Iter #\d+: [\d.]+ (?:img|sen)/sec)"
)

# vLLM / SGLang serving results: which keys are per-request lists worth a row each
_REQUEST_LISTS = {
    "ttfts": ("ttft_s", "s"),
    "latencies": ("latency_s", "s"),
    "output_lens": ("output_tokens", "tokens"),
    "input_lens": ("input_tokens", "tokens"),
    "tpots": ("tpot_s", "s"),
}


def _unit(key: str) -> str | None:
    """The unit a serving-benchmark key names by its suffix (vLLM and SGLang spell them so)."""
    k = key.lower()
    if k.endswith("_ms"):
        return "ms"
    if k.endswith(("_s", "_sec", "latency")) or k in ("duration", "benchmark_duration"):
        return "s"
    if "throughput" in k:
        return "tokens/s" if "token" in k or k.startswith("output") else "requests/s"
    if "tokens" in k or k.endswith("_lens"):
        return "tokens"
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(float(v)) else None
    try:
        f = float(str(v).strip())
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _count(text: str) -> int | None:
    """A count a log states (``Batch size: 64``); None when it is no plausible one."""
    return int(text) if len(text) <= 18 else None


def _int(v: Any) -> int | None:
    f = _number(v)
    return int(f) if f is not None and f == int(f) and abs(f) < 2**63 else None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    return {"true": True, "false": False, "1": True, "0": False}.get(text)


class ResultsReader:
    """Benchmark result files (``detect`` kind ``results``; the flavor names the format)."""

    name = "results"
    tables = ("results",)

    def __init__(self, options: ReadOptions | None = None) -> None:
        self.limits = options.limits if options is not None else DEFAULT_LIMITS

    def prepare(self, path: str, detected: Detected) -> Prepared:
        return Prepared(rank=0, rank_source="results file (not per rank)")

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
        rows: list[dict[str, Any]] = []

        def emit(row: dict[str, Any]) -> None:
            row.setdefault("source_format", detected.flavor)
            row["file_id"] = file_id
            row["row_idx"] = len(rows) + result.rows_written
            rows.append(row)
            if len(rows) >= 8192:
                flush()

        def flush() -> None:
            if rows:
                sinks["results"](
                    record_batch(
                        RESULTS_SCHEMA, {f.name: [r.get(f.name) for r in rows] for f in RESULTS_SCHEMA}, len(rows)
                    )
                )
                result.rows_written += len(rows)
                rows.clear()

        parse = {
            "ddlb_csv": _ddlb_csv,
            "ddl_benchmarks_log": _ddl_log,
            "vllm_bench_json": _serving_json,
            "sglang_bench_jsonl": _serving_jsonl,
        }[detected.flavor]
        limits = self.limits
        with Source(path, progress, limits=limits, keep_bom=True) as source:  # utf-8-sig drops it
            # typeshed wants a buffered stream (read1 and more); TextIOWrapper uses read() when read1 is absent
            text = io.TextIOWrapper(
                source.stream,  # type: ignore[type-var]
                encoding="utf-8-sig",
                errors="replace",
                newline="",
            )
            lines = _bounded_lines(text, path, limits)
            try:
                if detected.flavor == "ddlb_csv":
                    _ddlb_csv(lines, emit, result, path, limits)
                else:
                    parse(lines, emit, result)
            except LimitExceeded:
                raise
            except gzip_errors() as e:
                raise TraceFileError(path, f"corrupt gzip stream: {e}") from e
            except (ValueError, csv.Error) as e:
                raise TraceFileError(path, str(e)) from e
            flush()
            result.content_hash = source.finish_hash()
            result.decompressed_bytes = source.stream.offset
        if result.rows_written == 0:
            raise TraceFileError(path, f"a {detected.flavor.replace('_', ' ')} file without one measurement")
        return result


def _bounded_lines(text: io.TextIOBase, path: str, limits: ReadLimits) -> Iterator[str]:
    """The file's lines, each at most ``max_event_bytes`` characters (a line is a results
    file's event: a CSV row, a log line, an SGLang JSON object)."""
    bound = limits.max_event_bytes
    number = 0
    while True:
        line = text.readline(bound + 1)
        number += 1
        if not line:
            return
        if len(line) > bound:
            raise line_too_long(path, number, limits)
        yield line


def _ddlb_csv(
    lines: Iterator[str], emit: Any, result: ReadResult, path: str = "", limits: ReadLimits = DEFAULT_LIMITS
) -> None:
    """DDLB's CSV: the header once (from the first row's keys), one row per
    (shape, implementation configuration). The header's width is checked before any
    row is split (10^6 columns took 209 s and 4 GB as dicts of every row)."""
    header = next(lines, None)
    if header is None:
        return
    columns = header.count(",") + 1
    if columns > limits.max_columns:
        raise too_many_columns(path, columns, limits)
    old_limit = csv.field_size_limit()
    csv.field_size_limit(limits.max_string_bytes)
    try:
        _ddlb_rows(itertools.chain([header], lines), emit, result, path, limits)
    finally:
        csv.field_size_limit(old_limit)


def _ddlb_rows(lines: Iterator[str], emit: Any, result: ReadResult, path: str, limits: ReadLimits) -> None:
    reader = csv.DictReader(lines)
    rows = iter(reader)
    idx = -1
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as e:
            if "field larger than field limit" in str(e):
                raise cell_too_long(path, reader.line_num + 1, limits) from e  # the line that failed
            raise TraceFileError(path, f"CSV line {reader.line_num}: {e}") from e
        idx += 1
        result.events_read += 1
        if None in row or any(v is None for v in row.values()):
            result.drops["row with another number of cells than the header", ""] += 1
            continue
        typed = {
            "implementation": row.get("implementation") or None,
            "dtype": row.get("dtype") or None,
            "world_size": _int(row.get("world_size")),
            "m": _int(row.get("m")),
            "n": _int(row.get("n")),
            "k": _int(row.get("k")),
            "valid": _bool(row.get("valid")) if "valid" in row else None,
        }
        config = {k: v for k, v in row.items() if k not in {c for c, _, _ in _DDLB_METRICS}}
        base = {**typed, "benchmark": "ddlb", "config_json": json.dumps(config), "run": idx}
        kept = 0
        for column, metric, unit in _DDLB_METRICS:
            if column in row:
                value = _number(row[column])
                if value is None:
                    result.drops[f"{column}: not a number", ""] += 1
                    continue
                emit({**base, "metric": metric, "value": value, "unit": unit})
                kept += 1
        if not kept:
            result.drops["row without a measurement", ""] += 1


def _ddl_log(lines: Iterator[str], emit: Any, result: ReadResult) -> None:
    """A ddl-benchmarks log: header lines, then the raw output of one or more tries
    (5 appended by its driver), each ending with the Total line."""
    config: dict[str, Any] = {}
    attempt = 0
    for line in lines:
        result.events_read += 1
        text = line.strip()
        if not text:
            continue
        for name, rule in _LOG_RULES:  # noqa: B007  `name` is the matched rule's, read after the loop
            m = rule.match(text)
            if m:
                break
        else:
            result.notes["log lines no rule knows"] += 1
            continue
        base = {
            "benchmark": config.get("model"),
            "batch_size": config.get("batch_size"),
            "world_size": config.get("world_size"),
            "config_json": json.dumps(config),
        }
        if name == "model":
            config["model"] = m.group(1)
        elif name in ("batch", "gpus"):
            count = _count(m.group(1))
            if count is None:
                result.drops[f"{name} line: not a plausible count", ""] += 1
            config["batch_size" if name == "batch" else "world_size"] = count
        elif name in ("date", "cmd"):
            config[name] = m.group(1)
        elif name == "iter":
            unit = f"{m.group(3)}/s"
            item = _count(m.group(1))
            value = _number(m.group(2))
            if item is None or value is None:
                result.drops["iter line: not a number", ""] += 1
                continue
            emit(
                {
                    **base,
                    "metric": "samples_per_s_per_gpu_iter",
                    "value": value,
                    "unit": unit,
                    "run": attempt,
                    "item": item,
                }
            )
        elif name == "per_gpu":
            unit = f"{m.group(1).lower()}/s"
            emit({**base, "metric": "samples_per_s_per_gpu", "value": float(m.group(2)), "unit": unit, "run": attempt})
            emit(
                {
                    **base,
                    "metric": "samples_per_s_per_gpu_ci95",
                    "value": float(m.group(3)),
                    "unit": unit,
                    "run": attempt,
                }
            )
        elif name == "total":
            unit = f"{m.group(1)}/s"
            base["world_size"] = _count(m.group(2))
            emit({**base, "metric": "total_samples_per_s", "value": float(m.group(3)), "unit": unit, "run": attempt})
            emit(
                {**base, "metric": "total_samples_per_s_ci95", "value": float(m.group(4)), "unit": unit, "run": attempt}
            )
            attempt += 1


def _serving(doc: Any, emit: Any, result: ReadResult, item_base: dict[str, Any]) -> None:
    """One serving/latency benchmark result object: numbers are metrics, text and flags
    the configuration, known per-request lists a row per request."""
    if not isinstance(doc, dict):
        result.drops["not a JSON object", ""] += 1
        return
    config = {k: v for k, v in doc.items() if not isinstance(v, (int, float, list, dict)) or isinstance(v, bool)}
    benchmark = "vllm bench latency" if "avg_latency" in doc else str(doc.get("backend") or "serving benchmark")
    base = {
        **item_base,
        "benchmark": benchmark,
        "implementation": doc.get("model_id") or doc.get("model"),
        "config_json": json.dumps(config, default=str),
    }
    for key, value in doc.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            number = _number(value)
            if number is None:
                result.drops[f"{key}: not a finite number", ""] += 1
                continue
            emit({**base, "metric": key, "value": number, "unit": _unit(key)})
        elif key == "percentiles" and isinstance(value, dict):  # vllm bench latency
            for p, v in value.items():
                number = _number(v)
                if number is not None:
                    emit({**base, "metric": f"latency_p{p}_s", "value": number, "unit": "s"})
        elif key in _REQUEST_LISTS and isinstance(value, list):
            metric, unit = _REQUEST_LISTS[key]
            for i, v in enumerate(value):
                number = _number(v)
                if number is not None:
                    emit({**base, "metric": metric, "value": number, "unit": unit, "item": i})


def _serving_json(lines: Iterator[str], emit: Any, result: ReadResult) -> None:
    text = "".join(lines)
    result.events_read = 1
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON at character {e.pos}: {e.msg}") from e
    _serving(doc, emit, result, {})


def _serving_jsonl(lines: Iterator[str], emit: Any, result: ReadResult) -> None:
    for run, line in enumerate(lines):
        if not line.strip():
            continue
        result.events_read += 1
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            result.drops["a line that is not JSON", ""] += 1
            continue
        _serving(doc, emit, result, {"run": run})
