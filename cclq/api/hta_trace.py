"""``ta.t``: the parts of HTA 0.5.0's ``Trace`` object that scripts use, over the warehouse.

HTA keeps each rank's events as a pandas frame (``t.get_trace(rank)``), names and
categories encoded as ids of a symbol table (``t.symbol_table``). Here the frame of a rank
is built from the view ``hta_trace_frame`` when it is first asked for, with HTA's
columns, row order, index labels and dtypes (``cclq.api.hta_frames``). Symbol ids are
this table's own numbering (HTA's come from the iteration order of a Python set, which
changes from run to run): a script that decodes them through ``t.symbol_table`` reads the
same names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from cclq.api.hta_data import HtaData
from cclq.api.hta_frames import int_dtype, pandas
from cclq.present.chrome_trace import id_value

# HTA 0.5.0's memory kernel names (hta/utils/utils.py), which shorten_name leaves alone
_MEMORY_KERNEL = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")


def shorten_name(name: str) -> str:
    """HTA's shortened name (utils.shorten_name): without the template and function
    arguments and the return type."""
    if _MEMORY_KERNEL.match(name) is not None or (name.find("<") < 0 and name.find("(") < 0):
        return name
    stack: list[str] = []
    for c in name.replace("->", ""):
        if c == ">":
            while stack and stack[-1] != "<":
                stack.pop()
            if stack and stack[-1] == "<":
                stack.pop()
        elif c == ")":
            while stack and stack[-1] != "(":
                stack.pop()
            if stack and stack[-1] == "(":
                stack.pop()
        else:
            stack.append(c)
    return "".join(stack).split(" ")[-1]


class TraceSymbolTable:
    """HTA's symbol table: names and categories of every rank, each with an integer id."""

    def __init__(self, symbols: Iterable[str] = ()) -> None:
        self.sym_table: list[str] = []
        self.sym_index: dict[str, int] = {}
        self.add_symbols(symbols)

    def add_symbols(self, symbols: Iterable[str]) -> None:
        for s in symbols:
            if s not in self.sym_index:
                self.sym_index[s] = len(self.sym_table)
                self.sym_table.append(s)

    def get_sym_id_map(self) -> dict[str, int]:
        return self.sym_index

    def get_sym_index(self) -> dict[str, int]:
        return self.sym_index

    def get_sym_table(self) -> list[str]:
        return self.sym_table

    def is_empty(self) -> bool:
        return not self.sym_table

    def find_matches(self, patterns: list[str]) -> list[int]:
        pattern = re.compile("|".join(re.escape(p) for p in patterns))
        return [i for i, s in enumerate(self.sym_table) if pattern.search(s)]

    def find_matched_symbols(self, patterns: list[str]) -> list[str]:
        pattern = re.compile("|".join(re.escape(p) for p in patterns))
        return [s for s in self.sym_table if pattern.search(s)]

    def decode_df(self, df: Any, create_new_columns: bool = True) -> None:
        """Adds s_name / s_cat (or replaces name / cat) with the decoded symbols."""
        for col in ("name", "cat"):
            if col in df.columns and df[col].dtype.kind == "i":
                df["s_" + col if create_new_columns else col] = df[col].map(lambda i: self.sym_table[i])


class Trace:
    """The loaded trace of a ``TraceAnalysis`` (HTA's ``ta.t``)."""

    def __init__(self, data: HtaData, trace_dir: Path, files: dict[int, Path]) -> None:
        self._data = data
        self.trace_path = str(trace_dir)
        self.trace_files: dict[int, str] = {rank: str(path) for rank, path in sorted(files.items())}
        self.is_parsed = True
        self._frames: dict[int, Any] = {}
        self._edits: dict[int, list[Callable[[Any], None]]] = {}  # see edit_frame
        self._symbols: TraceSymbolTable | None = None

    @property
    def data(self) -> HtaData:
        """cclq's own: the warehouse session this trace's frames come from."""
        return self._data

    # -- what HTA's Trace offers ---------------------------------------------------
    def get_ranks(self) -> list[int]:
        """The ranks of the trace, sorted."""
        return self._data.ranks

    @property
    def min_ts(self) -> int | float:
        """The time origin HTA aligns every rank's ts to (µs, the files' clock)."""
        origin = self._data.origin_us
        return int(origin) if float(origin).is_integer() else origin

    @property
    def symbol_table(self) -> TraceSymbolTable:
        if self._symbols is None:
            rows = self._data.rows(
                "SELECT DISTINCT s FROM (SELECT unnest([cat, name]) AS s FROM hta_loaded) "
                "WHERE s IS NOT NULL ORDER BY s",
                "hta_loaded",
            )
            self._symbols = TraceSymbolTable(rows.column("s").to_pylist())
        return self._symbols

    @property
    def traces(self) -> dict[int, Any]:
        return self.get_all_traces()

    @property
    def meta_data(self) -> dict[int, dict[str, Any]]:
        """Each rank's top-level keys of its file that the warehouse keeps (HTA keeps all of
        them): distributedInfo, deviceProperties, baseTimeNanoseconds."""
        rows = self._data.rows(
            "SELECT rank, distributed_info, device_properties, base_time_ns FROM files ORDER BY rank"
        ).to_pylist()
        out: dict[int, dict[str, Any]] = {}
        for r in rows:
            meta: dict[str, Any] = {}
            if r["distributed_info"]:
                meta["distributedInfo"] = json.loads(r["distributed_info"])
            if r["device_properties"]:
                meta["deviceProperties"] = json.loads(r["device_properties"])
            if r["base_time_ns"] is not None:
                meta["baseTimeNanoseconds"] = r["base_time_ns"]
            out[int(r["rank"])] = meta
        return out

    def get_iterations(self, rank: int | None = None) -> list[Any]:
        """The ProfilerStep numbers of ``rank``'s rows (default: the first rank), sorted."""
        rank = self.get_ranks()[0] if rank is None else rank
        if rank not in self.get_ranks():
            return []
        rows = self._data.rows(
            "SELECT DISTINCT iteration FROM hta_iterations WHERE rank = ? AND iteration >= 0 ORDER BY iteration",
            "hta_iterations",
            params=[rank],
        )
        values = rows.column("iteration").to_pylist()
        if self._data.dtypes(rank).iteration == "float64":
            return [float(v) for v in values]
        return [int(v) for v in values]

    def get_trace_duration(self, rank: int | None = None) -> int | float:
        """Last ts - first ts of ``rank``'s rows (µs)."""
        rank = self.get_ranks()[0] if rank is None else rank
        frame = self.get_trace(rank)
        return frame.ts.max() - frame.ts.min()

    def get_trace(self, rank: int) -> Any:
        """``rank``'s frame, as HTA holds it (see the module docstring)."""
        self._data.require_ranks(rank)
        if rank not in self._frames:
            frame = self._frame(rank)
            for edit in self._edits.pop(rank, []):
                edit(frame)
            self._frames[rank] = frame
        return self._frames[rank]

    def edit_frame(self, rank: int, edit: Callable[[Any], None]) -> None:
        """cclq's own: applies ``edit`` to ``rank``'s frame, now if it is built, else when it
        is. An analysis whose HTA counterpart alters the frame on its way to an answer that
        reads none of it (get_gpu_kernels_with_user_annotations on a trace without GPU
        annotations) leaves the same frame behind without building it (29 ms of 0.6 s on
        hta_alexnet)."""
        self._data.require_ranks(rank)
        if rank in self._frames:
            edit(self._frames[rank])
        else:
            self._edits.setdefault(rank, []).append(edit)

    def get_all_traces(self) -> dict[int, Any]:
        return {rank: self.get_trace(rank) for rank in self.get_ranks()}

    def decode_symbol_ids(self, use_shorten_name: bool = True) -> None:
        """Adds s_name / s_cat to every rank's frame (HTA's Trace.decode_symbol_ids)."""
        table = self.symbol_table.get_sym_table()
        names = [shorten_name(s) for s in table] if use_shorten_name else table
        for frame in self.get_all_traces().values():
            frame["s_name"] = frame["name"].map(lambda i: names[i] if i >= 0 else "")
            frame["s_cat"] = frame["cat"].map(lambda i: names[i] if i >= 0 else "")

    def convert_time_series_to_events(self, series: Any, counter_name: str, counter_col: str) -> list[dict[str, Any]]:
        """A time series (pid, ts, the counter column; name and id when present) as Chrome
        counter events at the trace's own times (HTA's Trace.convert_time_series_to_events)."""
        return list(self.time_series_events(series, counter_name, counter_col))

    def time_series_events(self, series: Any, counter_name: str, counter_col: str) -> Iterator[dict[str, Any]]:
        """cclq's own: ``convert_time_series_to_events``'s events one at a time, so that a
        writer holds one event, not a list of them (455 k dicts on an 86 MB trace)."""
        if not {"pid", "ts", counter_col} <= set(series.columns):
            return
        # the columns walked together (as HTA's to_dict("records") gives them: pid, ts,
        # args, ph, name, id; Python numbers), not through a frame of dicts
        pids = series["pid"].tolist()
        times = (series["ts"] + self.min_ts).tolist()
        values = series[counter_col].tolist()
        names = series["name"].tolist() if "name" in series.columns else [counter_name] * len(pids)
        if "id" in series.columns:
            for p, t, v, n, i in zip(pids, times, values, names, series["id"].tolist()):
                yield {"pid": p, "ts": t, "args": {counter_name: v}, "ph": "C", "name": n, "id": i}
        else:
            for p, t, v, n in zip(pids, times, values, names):
                yield {"pid": p, "ts": t, "args": {counter_name: v}, "ph": "C", "name": n}

    # -- the frame -------------------------------------------------------------------
    def _frame(self, rank: int) -> Any:
        """``rank``'s frame, built a column at a time from the Arrow rows (numbers as
        numpy arrays, texts decoded once per distinct value), each column's Arrow data
        dropped once converted: a list of Python objects per column of the whole table
        held 240 MB at the peak of a 54 MB trace and took 1.3 s."""
        pd = pandas()
        import numpy as np  # with pandas, in the hta extra

        table = self._data.rows(
            "SELECT * EXCLUDE (trace, rank, copies) FROM hta_trace_frame WHERE rank = ? ORDER BY frame_pos",
            "hta_events",
            "hta_iterations",
            "hta_rank_dtypes",
            params=[rank],
        )
        ids = self.symbol_table.get_sym_id_map()
        dtypes = self._data.dtypes(rank)
        n = table.num_rows
        label = _numbers(table.column("frame_label"))
        cols = {name: table.column(name) for name in table.column_names}
        del table
        columns: dict[str, Any] = {
            "index": pd.array(_numbers(cols.pop("index")), dtype=dtypes.index),
            "cat": pd.array(_decoded(cols.pop("cat"), ids.__getitem__), dtype="int64"),
            "name": pd.array(_decoded(cols.pop("name"), ids.__getitem__), dtype="int64"),
            "pid": pd.array(_decoded(cols.pop("pid"), id_value), dtype=object),
            "tid": pd.array(_decoded(cols.pop("tid"), id_value), dtype=object),
        }
        ts = _numbers(cols.pop("ts"))  # a null is NaN, not whole: the column stays float64
        if np.isfinite(ts).all() and (ts == np.floor(ts)).all():
            columns["ts"] = pd.array(ts.astype("int64"), dtype="int64")
        else:
            columns["ts"] = pd.array(ts, dtype="float64")
        del ts
        columns["dur"] = pd.array(_numbers(cols.pop("dur")), dtype="float64")
        rounded = bool(
            self._data.rows("SELECT rounds_to_us FROM hta_rank_dtypes WHERE rank = ?", "hta_rank_dtypes", params=[rank])
            .column(0)[0]
            .as_py()
        )
        end = cols.pop("end")
        if rounded:  # HTA computes `end` while rounding, so it comes right after dur
            columns["end"] = pd.array(_numbers(end), dtype="float64")
        columns["stream"] = pd.array(_numbers(cols.pop("stream")), dtype=dtypes.stream)
        columns["correlation"] = pd.array(_numbers(cols.pop("correlation")), dtype=dtypes.correlation)
        for name in ("bytes",):
            values = _numbers(cols.pop(name))
            columns[name] = pd.array(values, dtype=_value_dtype(values))
        columns["memory_bw_gbps"] = pd.array(_numbers(cols.pop("memory_bw_gbps")), dtype="float64")
        for name in ("wait_on_stream", "wait_on_cuda_event_record_corr_id"):
            values = _numbers(cols.pop(name))
            columns[name] = pd.array(values, dtype=_value_dtype(values))
        for name in ("input_dims", "input_type", "input_strides"):
            columns[name] = pd.array(_decoded(cols.pop(name), _json_value, missing="-1"), dtype=object)
        values = _numbers(cols.pop("external_id"))
        columns["external_id"] = pd.array(values, dtype=_value_dtype(values))
        columns["index_correlation"] = pd.array(_numbers(cols.pop("index_correlation")), dtype=dtypes.index_correlation)
        columns["iteration"] = pd.array(_numbers(cols.pop("iteration")), dtype=dtypes.iteration)  # NaN: no step
        if not rounded:
            columns["end"] = pd.array(_numbers(end), dtype="float64")
        del end
        return pd.DataFrame(columns, index=pd.Index(label, dtype="int64") if n else None)


def _numbers(column: pa.ChunkedArray) -> Any:
    """A numeric column as one numpy array; where it has nulls, a float64 array with NaN
    for each (as pandas holds a list with None)."""
    import numpy as np  # with pandas, in the hta extra

    if column.null_count:
        return np.array(column.to_pylist(), dtype="float64")
    return column.to_numpy()


def _decoded(column: pa.ChunkedArray, decode: Callable[[Any], Any], missing: Any = None) -> Any:
    """A column of texts as a numpy object array, ``decode`` called once per distinct
    text (``missing`` for a null): rows with the same text share one decoded value."""
    import numpy as np  # with pandas, in the hta extra

    out = np.empty(len(column), dtype=object)
    pos = 0
    for chunk in column.chunks:
        encoded = chunk.dictionary_encode()
        decoded = np.empty(len(encoded.dictionary) + 1, dtype=object)
        decoded[:-1] = [decode(v) for v in encoded.dictionary.to_pylist()]
        decoded[-1] = missing
        indices = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy(zero_copy_only=False)
        out[pos : pos + len(chunk)] = decoded[indices]
        pos += len(chunk)
    return out


def _json_value(text: str) -> Any:
    """A JSON text as Python values: orjson (4-5x json's speed: 217 k shapes of an 86 MB
    trace took 1.6 s), json for what orjson refuses (NaN, integers past 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _value_dtype(values: Any) -> str:
    """The downcast dtype of an integer column of HTA's frame, from the values it holds
    (a numpy array)."""
    return int_dtype(int(values.min()), int(values.max())) if len(values) else "int8"
