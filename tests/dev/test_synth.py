"""cclq.synth.kineto: the hand-placed builder and the streamed realistic generator."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from cclq.synth.kineto import (
    KinetoTraceBuilder,
    Micros,
    generate_rank_trace,
    generate_workload,
)

TIME_RE = re.compile(r'"(ts|dur)": (-?[0-9][0-9.eE+-]*)')


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def time_texts(text: str) -> list[str]:
    return [m.group(2) for m in TIME_RE.finditer(text)]


def x_events(doc: dict, cat: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


# ---------------------------------------------------------------------------- builder


def test_builder_trace_parses_with_top_level_keys(tmp_path: Path) -> None:
    b = KinetoTraceBuilder(rank=1, world_size=4)
    b.profiler_step(3, 0, 10_000, gpu_stream=7)
    b.cpu_op("aten::mm", 1_000, 5_000)
    b.kernel("gemm", 2_000, 4_000, launch_ts=1_500)
    doc = load(b.write(tmp_path / "t.json"))
    assert list(doc) == [
        "schemaVersion",
        "deviceProperties",
        "distributedInfo",
        "displayTimeUnit",
        "baseTimeNanoseconds",
        "traceEvents",
        "traceName",
    ]
    assert doc["schemaVersion"] == 1
    assert doc["baseTimeNanoseconds"] == 1_700_000_000_000_000_000
    assert doc["deviceProperties"][0]["numSms"] == 132
    di = doc["distributedInfo"]
    assert (di["rank"], di["world_size"], di["backend"]) == (1, 4, "nccl")
    assert di["pg_config"][0]["ranks"] == [0, 1, 2, 3]
    # rank 1 -> device 1; the GPU copy of the step annotation sits on stream 7 of GPU 1
    (gpu_step,) = x_events(doc, "gpu_user_annotation")
    (cpu_step,) = [e for e in x_events(doc, "user_annotation") if e["name"] == "ProfilerStep#3"]
    assert (gpu_step["pid"], gpu_step["tid"]) == (1, 7)
    assert gpu_step["args"]["External id"] == cpu_step["args"]["External id"]
    assert (gpu_step["ts"], gpu_step["dur"]) == (cpu_step["ts"], cpu_step["dur"])


def test_ts_text_keeps_three_decimals_and_is_exact(tmp_path: Path) -> None:
    ns = 1712195495519689047
    b = KinetoTraceBuilder(base_time_ns=None)
    b.cpu_op("op", ns, 500)
    b.kernel("k", ns + 1_000, 2_000_000_000_001)
    path = b.write(tmp_path / "abs.json")
    text = path.read_text()
    assert '"ts": 1712195495519689.047' in text
    assert '"dur": 0.500' in text
    assert '"dur": 2000000000.001' in text
    assert all(re.fullmatch(r"-?\d+\.\d{3}", t) for t in time_texts(text))
    doc = load(path)
    assert "baseTimeNanoseconds" not in doc
    (op,) = x_events(doc, "cpu_op")
    assert op["ts"] * 1000 == ns  # Decimal parse: exact
    # events() exposes the same values: float-comparable, exact ns kept
    ev = b.events()[0]
    assert isinstance(ev["ts"], Micros) and ev["ts"].ns == ns and repr(ev["dur"]) == "0.500"
    assert ev["dur"] == 0.5


def test_relative_times_with_base(tmp_path: Path) -> None:
    b = KinetoTraceBuilder()
    b.cpu_op("op", 1_234_567, 1)
    text = b.write(tmp_path / "rel.json").read_text()
    assert '"ts": 1234.567, "dur": 0.001' in text


def test_correlation_and_flow_linkage(tmp_path: Path) -> None:
    b = KinetoTraceBuilder(pid=77, tid=78, device=3)
    outer = b.cpu_op("aten::linear", 0, 100_000)
    inner = b.cpu_op("aten::addmm", 10_000, 50_000)
    c1 = b.kernel("gemm", 70_000, 20_000, stream=7, launch_ts=20_000, launch_dur=4_000)
    c2 = b.kernel("relu", 95_000, 1_000, stream=7, launch_ts=80_000)
    c3 = b.kernel("unlinked", 200_000, 1_000)
    assert (c1, c2, c3) == (1, 2, 3)
    doc = load(b.write(tmp_path / "f.json"))
    kernels = {e["args"]["correlation"]: e for e in x_events(doc, "kernel")}
    runtimes = {e["args"]["correlation"]: e for e in x_events(doc, "cuda_runtime")}
    assert set(runtimes) == {1, 2}
    # innermost enclosing cpu_op gives the External id
    assert kernels[1]["args"]["External id"] == inner
    assert kernels[2]["args"]["External id"] == outer
    assert "External id" not in kernels[3]["args"]
    assert runtimes[1]["name"] == "cudaLaunchKernel" and runtimes[1]["args"]["cbid"] == 211
    assert runtimes[1]["args"]["External id"] == inner
    assert (runtimes[1]["pid"], runtimes[1]["tid"]) == (77, 78)
    assert runtimes[1]["ts"] == Decimal("20.000") and runtimes[1]["dur"] == Decimal("4.000")
    k = kernels[1]
    assert (k["pid"], k["tid"], k["args"]["device"], k["args"]["stream"]) == (3, 7, 3, 7)
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "ac2g"]
    assert len(flows) == 4
    s = next(e for e in flows if e["ph"] == "s" and e["id"] == 1)
    f = next(e for e in flows if e["ph"] == "f" and e["id"] == 1)
    assert (s["pid"], s["tid"], s["ts"]) == (77, 78, Decimal("20.000"))
    assert (f["pid"], f["tid"], f["ts"], f["bp"]) == (3, 7, k["ts"], "e")
    assert "bp" not in s


@pytest.mark.parametrize("where", ["before", "after", "none"])
def test_distributed_info_position(tmp_path: Path, where: str) -> None:
    b = KinetoTraceBuilder(rank=2, world_size=8, distributed_info=where)
    b.cpu_op("op", 0, 10)
    keys = list(load(b.write(tmp_path / "d.json")))
    te = keys.index("traceEvents")
    if where == "none":
        assert "distributedInfo" not in keys
    elif where == "before":
        assert keys.index("distributedInfo") < te
    else:
        assert keys.index("distributedInfo") == te + 1 and keys[-1] == "traceName"


def test_nccl_kernel_collective_args(tmp_path: Path) -> None:
    b = KinetoTraceBuilder(rank=0, world_size=4)
    b.nccl_kernel("allreduce", 0, 1_000, nelems=100, dtype="BFloat16")
    b.nccl_kernel("allgather", 2_000, 1_000, nelems=100)
    b.nccl_kernel("reduce_scatter", 4_000, 1_000, nelems=100)
    b.nccl_kernel("all_to_all", 6_000, 1_000, nelems=100)
    b.nccl_kernel("allreduce", 8_000, 1_000, pg_name="5", pg_desc="tp", group_size=2)
    b.nccl_kernel("allreduce", 10_000, 1_000)
    doc = load(b.write(tmp_path / "n.json"))
    ks = x_events(doc, "kernel")
    assert [k["name"].split("(")[0] for k in ks] == [
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
        "ncclDevKernel_AllGather_RING_LL",
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL",
        "ncclDevKernel_SendRecv",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    ]
    a = [k["args"] for k in ks]
    assert all(k["tid"] == 20 for k in ks)
    assert [x["Collective name"] for x in a[:4]] == ["allreduce", "allgather", "reduce_scatter", "all_to_all"]
    assert [(x["In msg nelems"], x["Out msg nelems"]) for x in a[:4]] == [
        (100, 100),
        (100, 400),
        (400, 100),
        (100, 100),
    ]
    assert a[0]["dtype"] == "BFloat16" and a[0]["Group size"] == 4
    assert a[0]["Process Group Ranks"] == "[0, 1, 2, 3]"
    assert a[4]["Process Group Ranks"] == "[0, 1]" and a[4]["Process Group Description"] == "tp"
    # Seq counts per process group from 0
    assert [x["Seq"] for x in a] == [0, 1, 2, 3, 0, 4]
    pgs = {p["pg_name"]: p for p in doc["distributedInfo"]["pg_config"]}
    assert pgs["5"]["pg_size"] == 2 and doc["distributedInfo"]["pg_count"] == 2


def test_memcpy_memset_and_other_phases(tmp_path: Path) -> None:
    b = KinetoTraceBuilder()
    b.memcpy(0, 1_000, 4_000_000, kind="DtoH")
    b.memset(2_000, 0, 64)
    b.instant("[memory]", 3_000, args={"Bytes": 8})
    b.counter("mem", 4_000, {"used": 5})
    b.begin("region", 5_000)
    b.end(6_000)
    b.raw({"ph": "X", "name": "odd", "pid": "p", "tid": "t", "ts": Micros(7_000), "dur": -1})
    b.raw('{"ph": "X", "name": "text", "pid": 1, "tid": 1, "ts": 7.5, "dur": 1}')
    doc = load(b.write(tmp_path / "m.json"))
    (cp,) = x_events(doc, "gpu_memcpy")
    assert cp["name"] == "Memcpy DtoH (Device -> Pageable)"
    assert cp["args"]["bytes"] == 4_000_000 and cp["args"]["memory bandwidth (GB/s)"] == 4000
    (ms,) = x_events(doc, "gpu_memset")
    assert ms["name"] == "Memset (Device)" and ms["args"]["memory bandwidth (GB/s)"] == "N/A"
    phases = [e["ph"] for e in doc["traceEvents"]]
    assert phases.count("B") == 1 and phases.count("E") == 1 and phases.count("C") == 1
    end = next(e for e in doc["traceEvents"] if e["ph"] == "E")
    assert "name" not in end
    assert any(e.get("name") == "text" for e in doc["traceEvents"])
    odd = next(e for e in doc["traceEvents"] if e.get("name") == "odd")
    assert odd["ts"] == Decimal("7.000") and odd["dur"] == -1


def test_trailer_span_and_metadata(tmp_path: Path) -> None:
    b = KinetoTraceBuilder(pid=10, tid=11, device=0)
    b.cpu_op("op", 5_000, 1_000)
    b.kernel("k", 8_000, 4_000, stream=9)
    b.memcpy(1_000, 500, 10, stream=3)
    doc = load(b.write(tmp_path / "s.json"))
    evs = doc["traceEvents"]
    (span,) = x_events(doc, "Trace")
    assert (span["pid"], span["tid"], span["name"]) == ("Spans", "PyTorch Profiler", "PyTorch Profiler (0)")
    assert span["ts"] == Decimal("1.000") and span["dur"] == Decimal("11.000")
    assert evs[-1] == {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": Decimal("12.000")}
    meta = {(e["name"], e["pid"], e["tid"]): e["args"] for e in evs if e["ph"] == "M"}
    assert meta[("process_name", 0, 0)] == {"name": "GPU 0"}
    assert meta[("thread_name", 0, 3)] == {"name": "stream 3"}
    assert meta[("thread_name", 0, 9)] == {"name": "stream 9"}
    assert ("thread_name", 10, 11) in meta and ("process_name", 10, 0) in meta


def test_builder_gz_write(tmp_path: Path) -> None:
    b = KinetoTraceBuilder()
    b.cpu_op("op", 0, 1)
    p = b.write(tmp_path / "t.json.gz")
    with open(p, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert load(p)["traceEvents"][0]["name"] == "op"


# -------------------------------------------------------------------------- generator


def test_generated_rank_trace_is_valid_and_realistic(tmp_path: Path) -> None:
    path = tmp_path / "r1.json"
    summary = generate_rank_trace(path, rank=1, world_size=4, steps=3, layers=3, seed=7)
    text = path.read_text()
    assert summary["bytes"] == len(text.encode()) == path.stat().st_size
    assert summary["steps"] == 3 and summary["rank"] == 1 and Path(summary["path"]) == path
    doc = json.loads(text, parse_float=Decimal)
    assert summary["events"] == len(doc["traceEvents"])
    assert doc["distributedInfo"]["rank"] == 1 and doc["distributedInfo"]["world_size"] == 4
    assert all(re.fullmatch(r"\d+\.\d{3}", t) for t in time_texts(text))

    steps = [e["name"] for e in x_events(doc, "user_annotation") if e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    gsteps = [e["name"] for e in x_events(doc, "gpu_user_annotation") if e["name"].startswith("ProfilerStep#")]
    assert gsteps == steps

    nccl = [e for e in x_events(doc, "kernel") if e["name"].startswith("ncclDevKernel")]
    assert len(nccl) == 3 * 2  # 3 layers -> buckets of 2 + 1, per step
    for k in nccl:
        a = k["args"]
        assert k["tid"] == 20 and a["Collective name"] == "allreduce"
        assert a["Group size"] == 4 and a["dtype"] == "BFloat16"
        assert a["In msg nelems"] == a["Out msg nelems"] > 0
        assert a["Process Group Name"] == "0" and a["Process Group Ranks"] == "[0, 1, 2, 3]"
    assert [k["args"]["Seq"] for k in nccl] == list(range(6))

    # every kernel is reachable from a runtime launch through its ac2g flow
    kernels = {e["args"]["correlation"]: e for e in x_events(doc, "kernel")}
    launches = {e["args"]["correlation"] for e in x_events(doc, "cuda_runtime")}
    assert set(kernels) <= launches
    flow_f = {e["id"]: e for e in doc["traceEvents"] if e.get("cat") == "ac2g" and e["ph"] == "f"}
    for corr, k in kernels.items():
        assert (flow_f[corr]["ts"], flow_f[corr]["tid"]) == (k["ts"], k["tid"])

    # kernels on one stream never overlap; some all-reduce overlaps compute
    def spans(stream: int) -> list[tuple[Decimal, Decimal]]:
        return sorted((e["ts"], e["ts"] + e["dur"]) for e in x_events(doc, "kernel") if e["tid"] == stream)

    comp = spans(7)
    assert all(b[0] >= a[1] for a, b in zip(comp, comp[1:]))
    overlapped = sum(max(Decimal(0), min(b, y) - max(a, x)) for a, b in spans(20) for x, y in comp)
    assert overlapped > 0


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    c = tmp_path / "c.json"
    generate_rank_trace(a, 0, 2, steps=2, layers=2, seed=3)
    generate_rank_trace(b, 0, 2, steps=2, layers=2, seed=3)
    generate_rank_trace(c, 1, 2, steps=2, layers=2, seed=3)
    assert a.read_bytes().replace(b"a.json", b"") == b.read_bytes().replace(b"b.json", b"")
    assert a.read_bytes().replace(b"a.json", b"") != c.read_bytes().replace(b"c.json", b"")


def test_generator_target_bytes(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    summary = generate_rank_trace(path, 0, 2, steps=1, layers=4, target_bytes=2_000_000)
    size = path.stat().st_size
    assert 2_000_000 <= size < 3_000_000
    assert summary["bytes"] == size and summary["steps"] > 1
    doc = load(path)
    names = {e["name"] for e in x_events(doc, "user_annotation")}
    assert {f"ProfilerStep#{i}" for i in range(summary["steps"])} <= names


def test_generator_gz_readable(tmp_path: Path) -> None:
    path = tmp_path / "r.json.gz"
    summary = generate_rank_trace(path, 0, 1, steps=1, layers=1, gz=True)
    with open(path, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rb") as f:
        raw = f.read()
    assert len(raw) == summary["bytes"]
    doc = json.loads(raw)
    assert doc["distributedInfo"]["world_size"] == 1
    assert any(e.get("name") == "ProfilerStep#0" for e in doc["traceEvents"])


def test_generate_workload_files_and_card(tmp_path: Path) -> None:
    paths = generate_workload(tmp_path / "wl", ranks=2, steps=2, layers=1, gz=True)
    assert [p.name for p in paths] == ["kineto_trace_0.json.gz", "kineto_trace_1.json.gz"]
    ranks = [load(p)["distributedInfo"]["rank"] for p in paths]
    assert ranks == [0, 1]
    card = yaml.safe_load((tmp_path / "wl" / "workload_card.yaml").read_text())
    assert card["workload"]["model"]["iteration"] == 2
    assert card["workload"]["model"]["model_family"] == "synthetic-mlp"
    assert card["workload"]["hardware"]["xpu_spec"]["total_count"] == 2
    assert card["Model-executor"]["model_plan_parallelization"]["dp_replicate"] == 2
    assert card["metric_source"]["traces"] == ["json"]
    assert generate_workload(tmp_path / "nocard", ranks=1, steps=1, layers=1, card=False)
    assert not (tmp_path / "nocard" / "workload_card.yaml").exists()
