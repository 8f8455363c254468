"""Turning decoded chunks (the C parser's columns, or msgspec's structs) into record
batches by the rules of ``events``: drops counted, B/E pairs closed in file order,
batches of at least ``batch_rows`` rows handed to the sink."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from cclq.formats.chrome import compiled
from cclq.formats.chrome.chunks import Chunk
from cclq.formats.chrome.columns import (
    EMPTY_OBJECT_TEXT,
    NULL_JSON,
    NULL_TEXT,
    canonical_args,
    decode_args,
    fast_promote,
    group_by_keys,
    positions,
    text_array_of_raws,
    times_from_text,
)
from cclq.formats.chrome.decode import (
    GENERIC,
    STRUCT_TYPES,
    FallbackToIjson,
    ReadSequentially,
    all_unset,
    astuple,
    parsed_args,
    raw_args,
)
from cclq.formats.chrome.events import (
    BAD_DUR,
    BAD_TS,
    E_WITHOUT_B,
    EMPTY_OBJECT,
    INT64_MAX,
    INT64_MIN,
    KIND_TYPE,
    NEGATIVE_DUR,
    NO_TS,
    NOT_AN_OBJECT,
    PROMOTED_COLUMNS,
    arg_plan,
    id_text,
    map_categories,
    promote_value,
    range_note,
    slice_key,
    text_array,
)
from cclq.formats.chrome.ijson_reader import BatchSink, EventBatch, ReadResult, add_bounds
from cclq.formats.chrome.jsonscan import StructureScanner
from cclq.formats.limits import ReadLimits
from cclq.schema import EVENT_SCHEMA

_B = "B"
_E = "E"
_M = "M"


COLUMN_KIND_OF = dict(PROMOTED_COLUMNS)


class Builder:
    """Turns decoded chunks into record batches by the rules of ``cclq.formats.chrome.events``."""

    def __init__(
        self,
        file_id: str,
        base: int,
        result: ReadResult,
        sink: BatchSink,
        batch_rows: int,
        limits: ReadLimits,
        depth: int,
        pairs: bool = True,
    ) -> None:
        self.limits = limits
        self.depth = depth  # the depth of an event (see ijson_reader.event_depth)
        self.value_levels = limits.max_depth - depth  # nesting an event's values may have within the bounds
        self.pairs = pairs  # False in a helper process, which sees one chunk and not the stacks
        self.file_id = file_id
        self.base = base
        self.result = result
        self.drops = result.drops
        self.sink = sink
        self.batch_rows = batch_rows
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.ts_bounds: list[int] = []
        self.open_slices: dict[tuple[Any, Any], list[tuple[int, Any, int, Any]]] = {}
        self.out_of_range: dict[str, int] = {}
        self.last_empty = -2
        self.last_index = -1

    # -- output
    def emit(self, batch: pa.RecordBatch) -> None:
        self._emit(batch)

    def _emit(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.batch_rows:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        for batch in self.pending:
            add_bounds(batch, self.ts_bounds)
            self.result.rows_written += batch.num_rows
        # at least batch_rows rows at once, as the reference reader writes them: the writer
        # makes one row group of a table's chunks, without copying them together
        table = pa.Table.from_batches(self.pending)
        self.pending, self.pending_rows = [], 0
        self.sink(table)

    # -- one chunk
    def add(self, chunk: Chunk) -> None:
        entries = chunk.entries
        first = chunk.first
        if not isinstance(entries, list):  # read by the C parser
            self._add_parsed(entries, first)
            return
        n = len(entries)
        self.last_index = first + n - 1
        if set(map(type, entries)) <= STRUCT_TYPES:
            objs, where = entries, None
        else:
            where = [i for i, e in enumerate(entries) if type(e) in STRUCT_TYPES]
            objs = [entries[i] for i in where]
        m = len(objs)
        if where is not None:
            self.drops[NOT_AN_OBJECT, ""] += n - m
        if not m:
            return
        # fields into columns: one tuple per event, transposed by zip, both in C (3x
        # faster than one attrgetter map per field)
        ph, cat, name, pid, tid, ts_in, dur_in, fid, bp, sc, args = zip(*map(astuple, objs))
        index = positions(first, n) if where is None else pa.array([first + i for i in where], pa.int64())
        keep = [True] * m
        drops = self.drops

        def drop(i: int, reason: str) -> None:
            if keep[i]:
                keep[i] = False
                drops[reason, id_text(ph[i]) or ""] += 1

        # 1. ts: absent (kept for M), empty object, unusable, beyond int64 with the base
        ts_ns, ts_missing, ts_bad = times_from_text(ts_in, self.value_levels)
        if ts_missing:
            empty_rows = [i for i in ts_missing if ph[i] is None and all_unset(objs[i])]
            empties = self._empty_entries(chunk, where, empty_rows) if empty_rows else set()
            for i in ts_missing:
                if i in empties:
                    keep[i] = False
                    drops[EMPTY_OBJECT, ""] += 1
                    self.last_empty = first + (i if where is None else where[i])
                elif ph[i] != _M:
                    drop(i, NO_TS)
        for i in ts_bad:
            drop(i, BAD_TS)
        ts_total = self._with_base(ts_ns, drop)
        # 2. B/E pairs (never written as they are: a closed pair becomes one B row)
        be = _B in ph or _E in ph
        if be and not self.pairs:
            raise ReadSequentially("B/E events")
        pairs = self._begin_end(ph, pid, tid, objs, ts_total, keep, first, where) if be else []
        # 3. dur: unusable, negative, or an end beyond int64
        dur_ns, _, dur_bad = times_from_text(dur_in, self.value_levels)
        self._check_durs(ts_total, dur_ns, dur_bad, keep, drop)

        rows = None if all(keep) else [i for i in range(m) if keep[i]]
        batch = self._columns(m, index, ph, cat, name, pid, tid, ts_total, dur_ns, fid, bp, sc, args, rows, chunk.text)
        if rows is not None:
            batch = batch.filter(pa.array(keep, pa.bool_()))
        if pairs:
            batch = self._merge_pairs(batch, keep, pairs)
        self._emit(batch)

    def _add_parsed(self, parsed: compiled.Parsed, first: int) -> None:
        """A chunk the C parser read: its drops and notes counted, its rows emitted."""
        self.last_index = first + parsed.entries - 1
        for key in parsed.drops:
            self.drops[key] += 1
        if parsed.last_empty >= 0:
            self.last_empty = first + parsed.last_empty
        self._count_range(parsed.out_of_range)
        if parsed.rows:
            self._emit(parsed.batch(self.file_id, first))

    def _with_base(self, ts: pa.Array, drop: Any) -> pa.Array:
        """ts + the file's base; rows where that leaves int64 are dropped as "bad ts"."""
        base = self.base
        lo, hi = (v.as_py() for v in pc.min_max(ts).values())
        if lo is None or not base:
            return ts
        if INT64_MIN <= lo + base and hi + base <= INT64_MAX:
            return pc.add(ts, pa.scalar(base, pa.int64()))
        values = ts.to_pylist()
        for i, t in enumerate(values):
            if t is None:
                continue
            if INT64_MIN <= t + base <= INT64_MAX:
                values[i] = t + base
            else:
                drop(i, BAD_TS)
                values[i] = None
        return pa.array(values, pa.int64())

    @staticmethod
    def _check_durs(ts: pa.Array, dur: pa.Array, dur_bad: list[int], keep: list[bool], drop: Any) -> None:
        """Drops rows still kept whose dur is unusable, negative, or ends beyond int64."""
        for i in dur_bad:
            drop(i, BAD_DUR)
        negative = pc.any(pc.less(dur, pa.scalar(0, pa.int64()))).as_py()
        hi_ts, hi_dur = pc.max(ts).as_py(), pc.max(dur).as_py()
        if not (negative or (hi_ts is not None and hi_dur is not None and hi_ts + hi_dur > INT64_MAX)):
            return
        for i, (t, d) in enumerate(zip(ts.to_pylist(), dur.to_pylist())):
            if d is None or not keep[i]:
                continue
            if d < 0:
                drop(i, NEGATIVE_DUR)
            elif t is not None and t + d > INT64_MAX:
                drop(i, BAD_DUR)

    def _empty_entries(self, chunk: Chunk, where: list[int] | None, rows: list[int]) -> set[int]:
        """Which of these rows were ``{}`` (a struct cannot tell {} from all-null keys)."""
        try:
            generic = GENERIC.decode(chunk.text)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            # a Raw value (args) is not checked when the chunk is decoded into structs: here
            # it is, and what does not decode is for the reference reader to report
            raise FallbackToIjson(f"an entry that does not decode ({e})") from None
        return {i for i in rows if generic[i if where is None else where[i]] == {}}

    def _begin_end(
        self,
        ph: Sequence[Any],
        pid: Sequence[Any],
        tid: Sequence[Any],
        objs: list[Any],
        ts: pa.Array,
        keep: list[bool],
        first: int,
        where: list[int] | None,
    ) -> list[tuple[int, tuple[Any, ...], Any, int, int]]:
        """B/E pairs, in file order: B rows wait on a stack per (pid, tid); an E closes the
        last one. Returns the closed pairs as (E row, B fields, merged args, ts, dur)."""
        ts_list = ts.to_pylist()
        pairs = []
        for i, p in enumerate(ph):
            if p != _B and p != _E:
                continue
            if not keep[i]:  # dropped for its ts
                continue
            keep[i] = False  # a B is written when its E arrives; an E never is
            key = slice_key(pid[i], tid[i])
            if p == _B:
                o = objs[i]
                self.open_slices.setdefault(key, []).append(
                    (first + (i if where is None else where[i]), o, ts_list[i], None)
                )
                continue
            stack = self.open_slices.get(key)
            if not stack:
                self.drops[E_WITHOUT_B, "E"] += 1
                continue
            b_idx, b, b_ts, _ = stack.pop()
            if ts_list[i] < b_ts:
                self.drops[NEGATIVE_DUR, "B"] += 1
                continue
            args: Any = raw_args(b.args)
            e_args = parsed_args(objs[i].args)
            if e_args and type(e_args) is dict:  # merged as parsed values, as the ijson reader merges
                b_args = parsed_args(b.args)
                args = {**b_args, **e_args} if type(b_args) is dict else e_args
            pairs.append(
                (
                    i,
                    (b_idx, _B, b.cat, b.name, b.pid, b.tid, None, None, b.id, b.bp, b.s),
                    args,
                    b_ts,
                    ts_list[i] - b_ts,
                )
            )
        return pairs

    def _merge_pairs(
        self, batch: pa.RecordBatch, keep: list[bool], pairs: list[tuple[int, tuple[Any, ...], Any, int, int]]
    ) -> pa.RecordBatch:
        """Puts closed B/E slices where their E was, as the reference reader writes them."""
        b_batch = EventBatch()
        for _row, fields, args, b_ts, dur in pairs:
            b_batch.b_times[len(b_batch.rows)] = (b_ts - self.base, dur)
            b_batch.add(fields, args)
        slices = b_batch.to_record_batch(self.file_id, self.base, self.drops)
        self._count_range(b_batch.out_of_range)
        if slices is None:
            return batch
        order = [i for i in range(len(keep)) if keep[i]] + [row for row, *_ in pairs]
        both = pa.Table.from_batches([batch, slices])
        return (
            both.take(pc.sort_indices(pa.array(order, pa.int64()))).combine_chunks().to_batches()[0]
            if both.num_rows
            else batch
        )

    def _count_range(self, counts: dict[str, int]) -> None:
        for column, k in counts.items():
            self.out_of_range[column] = self.out_of_range.get(column, 0) + k

    # -- columns
    def _columns(
        self,
        m: int,
        index: pa.Array,
        ph: Sequence[Any],
        cat: Sequence[Any],
        name: Sequence[Any],
        pid: Sequence[Any],
        tid: Sequence[Any],
        ts: pa.Array,
        dur: pa.Array,
        fid: Sequence[Any],
        bp: Sequence[Any],
        sc: Sequence[Any],
        args: Sequence[msgspec.Raw],
        rows: list[int] | None,
        text: bytes,
    ) -> pa.RecordBatch:
        args_col, promoted = self._args_columns(args, rows, text)
        cat_col, cat_raw = map_categories(text_array(cat))
        arrays = [
            pa.array([self.file_id] * m, pa.string()),
            index,
            text_array(ph),
            cat_col,
            cat_raw,
            text_array(name),
            text_array(pid),
            text_array(tid),
            ts,
            dur,
            text_array(fid),
            text_array(bp),
            text_array(sc),
            args_col,
        ] + [
            promoted[column] if column in promoted else pa.nulls(m, KIND_TYPE[kind])
            for column, kind in PROMOTED_COLUMNS
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)

    def _args_columns(
        self, raws: Sequence[msgspec.Raw], rows: list[int] | None, text: bytes
    ) -> tuple[pa.Array, dict[str, pa.Array]]:
        """The ``args`` column (each event's args as its compact source text; NULL where
        absent or ``null``) and the promoted columns.

        The text is msgspec's raw value, joined into one Arrow array (UTF-8 checked
        there). Its nesting was not checked by the decoder's types: a value with more
        brackets than the bound allows (a bound never exceeded when it holds) has the
        chunk's ``text`` go through the structural scan. Promoted columns: see
        ``_promote_grouped``.

        (pyarrow's JSON reader with the promoted keys as an explicit schema gives the
        same columns in C, but cost 1.25x the CPU of ``_promote_grouped`` on Kineto
        files: its cost grows with the number of fields, 41, of which Kineto has 29.)
        """
        args_text, lengths = text_array_of_raws(raws)
        null = pc.or_(pc.equal(lengths, pa.scalar(0, pa.int32())), pc.equal(args_text, NULL_JSON))
        any_null = pc.any(null).as_py()
        args_col = pc.if_else(null, NULL_TEXT, args_text) if any_null else args_text
        if (
            len(raws)
            and pc.max(pc.add(pc.count_substring(args_text, "["), pc.count_substring(args_text, "{"))).as_py()
            > self.value_levels
        ):
            scanner = StructureScanner(self.limits, self.depth, offset=0, depth=self.depth - 1)
            scanner.feed(text[1:-1])
            if scanner.violation is not None:
                raise FallbackToIjson(f"a bound is exceeded ({scanner.violation.kind})")
        objects = pc.if_else(null, EMPTY_OBJECT_TEXT, args_text) if any_null else args_text
        args = decode_args(objects)
        return canonical_args(args_col, objects, args), self._promote_grouped(args, rows)

    def _promote_grouped(self, args: list[Any], rows: list[int] | None) -> dict[str, pa.Array]:
        """The promoted columns from the args decoded as values (``decode_args``):
        events grouped by their key tuple (a Kineto kernel always has the same
        dozen keys), each promoted key taken for a whole group at once in C where every
        value is plain (``fast_promote``), else by ``events.promote_value``; each column
        put back in row order with one ``take``."""
        m = len(args)
        groups = group_by_keys(args)
        kept = None if rows is None else set(rows)
        sizes: list[int] = []
        columns: dict[str, dict[int, pa.Array]] = {}  # column -> {group number: values}
        order: list[int] = []
        for keys, idxs in groups.items():
            plan = arg_plan(keys)
            if not plan:
                continue
            gi = len(sizes)
            sizes.append(len(idxs))
            order += idxs
            gd = [args[idxs[0]]] if len(idxs) == 1 else itemgetter(*idxs)(args)
            for key, column, kind in plan:
                values = list(map(itemgetter(key), gd))
                arr = fast_promote(kind, values)
                if arr is None:
                    out = []
                    for i, v in zip(idxs, values):
                        value, _, too_big = promote_value(kind, v)
                        out.append(value)
                        if too_big and (kept is None or i in kept):
                            self.out_of_range[column] = self.out_of_range.get(column, 0) + 1
                    arr = pa.array(out, KIND_TYPE[kind])
                columns.setdefault(column, {})[gi] = arr
        if not columns:
            return {}
        covered = len(order)
        if covered == m and sizes == [m] and order[0] == 0 and order[-1] == m - 1:
            where = None  # one group, every row, in order
        else:
            where = pc.scatter(pa.array(range(covered), pa.int64()), pa.array(order, pa.int64()), max_index=m - 1)
        out_columns: dict[str, pa.Array] = {}
        for column, parts in columns.items():
            typ = KIND_TYPE[COLUMN_KIND_OF[column]]
            grouped = pa.concat_arrays([parts[g] if g in parts else pa.nulls(n, typ) for g, n in enumerate(sizes)])
            out_columns[column] = grouped if where is None else grouped.take(where)
        return out_columns

    # -- the end of the file
    def finish(self) -> None:
        unclosed = EventBatch()
        for stack in self.open_slices.values():
            for b_idx, b, b_ts, _ in stack:
                unclosed.b_times[len(unclosed.rows)] = (b_ts - self.base, None)  # type: ignore[assignment]
                unclosed.add((b_idx, _B, b.cat, b.name, b.pid, b.tid, None, None, b.id, b.bp, b.s), raw_args(b.args))
        if unclosed.rows:
            self.result.notes["B without E (kept, dur_ns NULL)"] = len(unclosed.rows)
            batch = unclosed.to_record_batch(self.file_id, self.base, self.drops)
            self._count_range(unclosed.out_of_range)
            if batch is not None:
                self._emit(batch)
        self._flush()
        for column, k in self.out_of_range.items():
            self.result.notes[range_note(column)] += k
