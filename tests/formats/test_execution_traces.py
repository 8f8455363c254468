"""PyTorch execution traces: streamed into et_nodes / et_tensors, linked to Kineto ops,
and used for collective sizes when Kineto gives none. Expected numbers come from the raw
JSON (plain ``json``) or from traces written in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import invoke
from helpers.paths import SHARED_TRACES, require_shared
from helpers.warehouse import query, run_ingest

from cclq.synth.kineto import KinetoTraceBuilder


def _tensor_bytes(value) -> int:
    """Sum of numel x itemsize over the tensors in an ET value, however nested."""
    if (
        isinstance(value, list)
        and len(value) == 6
        and all(isinstance(x, int) for x in value[:5])
        and isinstance(value[5], str)
    ):
        return value[3] * value[4]
    if isinstance(value, list):
        return sum(_tensor_bytes(v) for v in value)
    return 0


@pytest.mark.slow
def test_the_dlrm_execution_traces_every_node_and_tensor(tmp_path, wh):
    require_shared()
    report = run_ingest([SHARED_TRACES / "dlrm_param_8xV100"], wh)
    assert not report.failed
    for rank in (0, 5):
        doc = json.loads((SHARED_TRACES / "dlrm_param_8xV100" / f"dlrm_eg_{rank}.json").read_text())
        nodes = doc["nodes"]
        assert query(wh, "SELECT count(*) FROM et_nodes WHERE rank = ?", [rank]) == [(len(nodes),)]
        comms = {
            n["id"]: (_tensor_bytes(n["inputs"]), _tensor_bytes(n["outputs"]))
            for n in nodes
            if n["name"] == "record_param_comms"
        }
        got = {
            i: (a, b)
            for i, a, b in query(
                wh,
                "SELECT node_id, input_bytes, output_bytes FROM et_nodes "
                "WHERE rank = ? AND name = 'record_param_comms'",
                [rank],
            )
        }
        assert got == comms and any(a > 0 for a, _ in comms.values())
        # the collective a 1.0.1 record_param_comms names, and the rank it says
        named = sorted(
            {
                (n["inputs"][4] if isinstance(n["inputs"][0], list) else n["inputs"][3])
                for n in nodes
                if n["name"] == "record_param_comms"
            }
        )
        assert (
            sorted(
                r[0]
                for r in query(
                    wh,
                    "SELECT DISTINCT collective_name FROM et_nodes WHERE rank = ? AND name = 'record_param_comms'",
                    [rank],
                )
            )
            == named
        )
        assert query(
            wh, "SELECT DISTINCT comm_rank FROM et_nodes WHERE rank = ? AND comm_rank IS NOT NULL", [rank]
        ) == [(rank,)]


@pytest.mark.slow
def test_dlrm_execution_traces_link_to_their_kineto_ops(tmp_path, wh):
    """PyTorch 2.0 wrote no Record function id on Kineto ops: the link is by op order, and
    every linked pair agrees on its tensors' shapes."""
    require_shared()
    run_ingest([SHARED_TRACES / "dlrm_param_8xV100"], wh)
    coverage = query(wh, "SELECT rank, et_linked_fraction, via FROM et_link_coverage ORDER BY rank")
    assert [r[0] for r in coverage] == list(range(8))
    assert all(fraction == 1.0 and via == "op order" for _, fraction, via in coverage)
    pairs = query(
        wh,
        """
        SELECT (s.args -> 'Input Dims' -> 0)::VARCHAR, (n.input_shapes::JSON -> 0)::VARCHAR
        FROM et_links AS l
        JOIN et_nodes AS n ON n.file_id = l.et_file_id AND n.node_id = l.node_id
        JOIN slices AS s ON s.file_id = l.file_id AND s.event_idx = l.event_idx
        WHERE json_type(s.args -> 'Input Dims' -> 0) = 'ARRAY' AND n.input_types LIKE '["Tensor%'""",
    )
    assert len(pairs) > 1000
    assert all(kineto == et for kineto, et in pairs)


@pytest.mark.slow
def test_chakra_tensor_lists_nest(tmp_path, wh):
    require_shared()
    run_ingest([SHARED_TRACES / "chakra_et"], wh)
    doc = json.loads(next((SHARED_TRACES / "chakra_et").glob("*.json")).read_text())
    gather = next(
        n for n in doc["nodes"] if n["name"] == "record_param_comms" and "all_gather" in n["inputs"]["values"]
    )
    expected = (_tensor_bytes(gather["inputs"]["values"]), _tensor_bytes(gather["outputs"]["values"]))
    assert expected == (4, 8)  # one float in, the two ranks' floats out
    assert query(
        wh, "SELECT input_bytes, output_bytes, collective_name, rf_id FROM et_nodes WHERE node_id = ?", [gather["id"]]
    ) == [(*expected, "all_gather", 19)]
    assert query(wh, "SELECT count(*) FROM et_tensors WHERE node_id = ? AND role = 'output'", [gather["id"]]) == [(2,)]
    assert query(wh, "SELECT format, rank_source FROM files") == [("pytorch_et", "default")]


def _et(path: Path, nodes: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "schema": "1.1.1-chakra.0.0.4",
                "pid": 1,
                "time": "2025-01-01 00:00:00",
                "start_ts": 1,
                "nodes": nodes,
                "finish_ts": 2,
            }
        )
    )
    return path


def _node(
    node_id: int,
    name: str,
    parent: int,
    rf_id: int,
    inputs: list,
    types: list,
    outputs=(),
    out_types=(),
    attrs: dict | None = None,
) -> dict:
    extra = [{"name": k, "type": "string", "value": v} for k, v in (attrs or {}).items()]
    return {
        "id": node_id,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": inputs, "shapes": [[]] * len(inputs), "types": types},
        "outputs": {"values": list(outputs), "shapes": [[]] * len(outputs), "types": list(out_types)},
        "attrs": [{"name": "rf_id", "type": "uint64", "value": rf_id}, *extra],
    }


def test_a_collective_kineto_cannot_size_takes_its_size_from_the_execution_trace(tmp_path, wh):
    """The kernel carries no collective args, its record_param_comms op no Input Dims: the
    ET node linked by record-function id has the exact tensors."""
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        b.cpu_op("record_param_comms", 1_000, 20_000, args={"Record function id": 19})
        b.kernel(
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            30_000,
            10_000,
            stream=20,
            launch_ts=5_000,
        )
        b.write(tmp_path / "job" / f"rank{rank}.json")
        _et(
            tmp_path / "job" / f"et_{rank}.json",
            [
                _node(1, "[pytorch|profiler|execution_trace|process]", 0, 0, [], []),
                _node(
                    19,
                    "record_param_comms",
                    1,
                    19,
                    [[[14, 15, 0, 1024, 2, "cuda:0"]], 12, 82149104, rank, "all_gather", [], [], 2],
                    [
                        "GenericList[Tensor(c10::BFloat16)]",
                        "Int",
                        "Int",
                        "Int",
                        "String",
                        "GenericList[]",
                        "GenericList[]",
                        "Int",
                    ],
                    [[[[19, 20, 0, 1024, 2, "cuda:0"], [5, 23, 0, 1024, 2, "cuda:0"]]]],
                    ["GenericList[GenericList[Tensor(c10::BFloat16),Tensor(c10::BFloat16)]]"],
                ),
            ],
        )
    report = run_ingest([tmp_path / "job"], wh)
    assert not report.failed, [o.message for o in report.failed]
    assert query(wh, "SELECT rank, via FROM et_links ORDER BY rank") == [(0, "rf_id"), (1, "rf_id")]
    rows = query(wh, "SELECT rank, coll_type, bytes, size_source FROM collectives ORDER BY rank")
    # all_gather: the gathered output, 2 x 1024 bf16 = 4096 bytes
    assert rows == [(r, "all_gather", 4096, "execution trace record_param_comms output tensors") for r in (0, 1)]


def test_a_truncated_execution_trace_fails_alone(tmp_path):
    good = KinetoTraceBuilder(rank=0, world_size=1)
    good.kernel("gemm", 0, 1_000)
    good.write(tmp_path / "w" / "rank0.json")
    text = json.dumps(
        {"schema": "1.0.1", "pid": 1, "nodes": [{"id": i, "name": "aten::add", "parent": 1} for i in range(100)]}
    )
    (tmp_path / "w" / "et_0.json").write_text(text[: len(text) // 2])
    result = invoke("ingest", str(tmp_path / "w"), "-w", str(tmp_path / "wh"), "-q")
    assert result.returncode == 1
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("cclq: error:")]
    assert line.startswith(f"cclq: error: {tmp_path / 'w' / 'et_0.json'}: invalid JSON at byte")
    assert "Traceback" not in result.stderr
