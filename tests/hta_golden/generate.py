"""Writes HTA 0.5.0's outputs that ../shared/golden/hta does not hold, for tests/query/test_hta_analyses.py.

Run with an interpreter that has HolisticTraceAnalysis==0.5.0 installed (a throwaway venv, as
`cclq bench --hta` uses; HTA is not a cclq dependency and this script imports nothing of cclq):

    python -m venv /tmp/htaenv
    /tmp/htaenv/bin/pip install HolisticTraceAnalysis==0.5.0 pandas==2.2.3 numpy==1.26.4
    /tmp/htaenv/bin/python tests/hta_golden/generate.py ../shared/traces tests/hta_golden

Writes, per trace folder hta_<name> that HTA loads, into <out>/<name>/:
  gpu_user_annotation_breakdown.csv   get_gpu_user_annotation_breakdown(use_gpu_annotation=True)
                                      (only where the trace has gpu_user_annotation events)
  frequent_cuda_kernel_sequences_<op>.csv  get_frequent_cuda_kernel_sequences(op, top_k=5)
  critical_path_summary.csv           critical_path_analysis(rank 0, "ProfilerStep", instance 0).summary()
and, across traces, <out>/trace_diff/<control>__vs__<test>.csv: TraceDiff.compare_traces with its
defaults (first rank, first iteration, CPU and GPU). A failure of HTA is written as <file>.error
(one line) so that the tests can say why a trace does not apply. The traces are never copied.

pandas and numpy are pinned: HTA 0.5.0's call graph and critical path fail under pandas 3 /
numpy 2.4 ("The axis argument to unique is not supported for dtype object", "Cannot specify
both 'axis' and 'index'/'columns'"); the files here were written with the pins above.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import traceback
from pathlib import Path

import pandas as pd
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import LabeledTrace, TraceDiff

FOLDERS = [
    "alexnet",
    "amd_mi250",
    "df_index_resolver",
    "mtia_single_rank",
    "nccl_data",
    "negative_queue_length",
    "ns_resolution",
    "trace_filter_2rank",
]
SEQUENCE_OPS = ["aten::linear", "aten::conv2d", "aten::mm", "aten::add_"]
DIFF_PAIRS = [("trace_filter_2rank", "negative_queue_length"), ("nccl_data", "ns_resolution")]


def _error(path: Path, exc: BaseException) -> None:
    line = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    path.with_suffix(path.suffix + ".error").write_text(line + "\n")


def _quiet(fn, *a, **kw):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*a, **kw)


def main(traces: Path, out: Path) -> None:
    for name in FOLDERS:
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        ta = TraceAnalysis(trace_dir=str(traces / f"hta_{name}"))
        rank = sorted(ta.t.get_ranks())[0]
        p = d / "gpu_user_annotation_breakdown.csv"
        try:
            df = _quiet(ta.get_gpu_user_annotation_breakdown, use_gpu_annotation=True, visualize=False)
            if df is not None:
                df.to_csv(p, index=False)
        except Exception as e:  # noqa: BLE001 (recorded for the tests)
            _error(p, e)
        for op in SEQUENCE_OPS:
            p = d / f"frequent_cuda_kernel_sequences_{op.replace('::', '_')}.csv"
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    df = _quiet(
                        ta.get_frequent_cuda_kernel_sequences,
                        operator_name=op,
                        output_dir=tmp,
                        rank=rank,
                        top_k=5,
                        visualize=False,
                    )
                if len(df):
                    df.to_csv(p, index=False)
            except Exception as e:  # noqa: BLE001
                _error(p, e)
        p = d / "critical_path_summary.csv"
        try:
            cp_graph, ok = _quiet(ta.critical_path_analysis, rank=rank, annotation="ProfilerStep", instance_id=0)
            if not ok:
                raise RuntimeError("critical_path_analysis returned success=False")
            s = cp_graph.summary()
            s.rename("percentage").rename_axis("bound_by").reset_index().to_csv(p, index=False)
        except Exception as e:  # noqa: BLE001
            _error(p, e)
            traceback.print_exc()
    d = out / "trace_diff"
    d.mkdir(parents=True, exist_ok=True)
    for control, test in DIFF_PAIRS:
        p = d / f"{control}__vs__{test}.csv"
        try:
            c = LabeledTrace(label="control", trace_dir=str(traces / f"hta_{control}"))
            t = LabeledTrace(label="test", trace_dir=str(traces / f"hta_{test}"))
            df = TraceDiff.compare_traces(c, t)
            df.rename_axis("name").reset_index().to_csv(p, index=False)
        except Exception as e:  # noqa: BLE001
            _error(p, e)
            traceback.print_exc()


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
