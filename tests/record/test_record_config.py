"""`cclq record` configs: DDLB's config.json read as DDLB reads it, cclq's extensions,
and errors that name the file and the key. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cclq.record.config import ConfigError, expand, resolve_auto, workload_name

# DDLB's README example, as published (its trailing comma removed: DDLB's own JSON
# loader would reject it too).
DDLB_README_CONFIG = {
    "benchmark": {
        "primitive": "tp_columnwise",
        "m": 65536,
        "n": 1024,
        "k": 1024,
        "dtype": "float32",
        "validate": True,
        "num_iterations": 50,
        "num_warmups": 5,
        "implementations": {
            "compute_only": [{"size": "unsharded"}],
            "pytorch": [{"backend": ["nccl", "ucc/tl/nccl", "ucc/tl/cuda"], "order": ["AG_before", "AG_after"]}],
            "fuser": [
                {"algorithm": ["default"], "backend": ["nccl"]},
                {"algorithm": ["coll_pipeline"], "s": [2, 8], "backend": ["ucc/tl/nccl"]},
            ],
        },
    }
}


def write(tmp_path: Path, doc: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if name.endswith(".json") else str(doc))
    return path


def test_ddlb_readme_config_expands_as_ddlb_does(tmp_path):
    runs = expand(write(tmp_path, DDLB_README_CONFIG), world_size=8, cuda=True)
    # DDLB: compute_only_0; pytorch_0..5 (3 backends x 2 orders, backend outer as listed);
    # fuser_0 and fuser_1, fuser_2 (s = 2, 8)
    assert [r.impl_id for r in runs] == ["compute_only_0"] + [f"pytorch_{i}" for i in range(6)] + [
        "fuser_0",
        "fuser_1",
        "fuser_2",
    ]
    pytorch = [r for r in runs if r.implementation == "pytorch"]
    assert [(r.options["backend"], r.options["order"]) for r in pytorch] == [
        ("nccl", "AG_before"),
        ("nccl", "AG_after"),
        ("ucc/tl/nccl", "AG_before"),
        ("ucc/tl/nccl", "AG_after"),
        ("ucc/tl/cuda", "AG_before"),
        ("ucc/tl/cuda", "AG_after"),
    ]
    assert all(r.sizes == {"m": 65536, "n": 1024, "k": 1024} for r in runs)
    assert all((r.num_iterations, r.num_warmups, r.dtype, r.validate) == (50, 5, "float32", True) for r in runs)
    # what cclq cannot run is listed with the reason, not dropped and not a config error
    runnable = [r.impl_id for r in runs if r.problem is None]
    assert runnable == ["compute_only_0", "pytorch_0", "pytorch_1"]
    assert "'fuser' is not available" in runs[-1].problem
    assert "ucc/tl/nccl" in pytorch[2].problem


def test_shapes_and_dtypes_expand_to_the_cartesian_product(tmp_path):
    cfg = {
        "primitive": "tp_rowwise",
        "m": [8, 16],
        "n": [4],
        "k": [8, 32],
        "dtype": ["float32", "bfloat16"],
        "implementations": {"pytorch": [{"collective": ["reduce_scatter", "all_reduce"]}]},
    }
    runs = expand(write(tmp_path, {"benchmark": cfg}), world_size=2)
    assert len(runs) == 2 * 1 * 2 * 2 * 2
    # DDLB's order: shape by shape (m outermost), then cclq's dtype, then implementations
    assert [(r.sizes["m"], r.sizes["k"], r.dtype, r.options["collective"]) for r in runs[:5]] == [
        (8, 8, "float32", "reduce_scatter"),
        (8, 8, "float32", "all_reduce"),
        (8, 8, "bfloat16", "reduce_scatter"),
        (8, 8, "bfloat16", "all_reduce"),
        (8, 32, "float32", "reduce_scatter"),
    ]


def test_labels_and_option_column_follow_ddlb(tmp_path):
    cfg = {
        "primitive": "tp_columnwise",
        "m": 8,
        "n": 4,
        "k": 4,
        "implementations": {
            "pytorch": [{"order": "AG_after", "backend": "gloo"}],
            "compute_only": [{"size": "unsharded"}],
        },
    }
    pytorch, compute = expand(write(tmp_path, cfg), world_size=2)
    # DDLB's option order (backend, order), defaults filled, then cclq's device
    assert pytorch.label == "pytorch (backend=gloo, order=AG_after, device=cpu)"
    assert pytorch.option_text == "backend=gloo, order=AG_after, device=cpu"
    # DDLB leaves compute_only's `size` out of both
    assert compute.label == "compute_only (device=cpu)" and compute.options["size"] == "unsharded"


def test_machine_dependent_defaults():
    assert resolve_auto({"backend": None, "device": None}, cuda=True) == {"backend": "nccl", "device": "cuda"}
    assert resolve_auto({"backend": None, "device": None}, cuda=False) == {"backend": "gloo", "device": "cpu"}
    assert resolve_auto({"backend": "gloo", "device": None}, cuda=True) == {"backend": "gloo", "device": "cpu"}
    assert resolve_auto({"size": "sharded", "device": None}, cuda=True)["device"] == "cuda"


def test_collectives_and_dp_mlp_take_their_own_sizes(tmp_path):
    coll = expand(
        write(
            tmp_path,
            {
                "primitive": "all_gather",
                "message_bytes": [64, 100],
                "dtype": "float32",
                "implementations": {"pytorch": [{}]},
            },
        ),
        world_size=2,
    )
    assert [r.sizes for r in coll] == [{"message_bytes": 64}, {"message_bytes": 100}]
    assert coll[0].problem is None
    # all_gather's message is the gathered output: 100 B is not 2 ranks x whole floats
    assert "not a multiple of 4 bytes (float32) x 2 ranks" in coll[1].problem
    mlp = expand(
        write(
            tmp_path,
            {
                "primitive": "dp_mlp",
                "m": 4,
                "n": 8,
                "k": 8,
                "dtype": ["float32", "int32"],
                "implementations": {"pytorch": [{"bucket_mb": [0, 1], "overlap": False}]},
            },
            "mlp.json",
        ),
        world_size=2,
    )
    assert [(r.sizes["layers"], r.options["bucket_mb"], r.options["overlap"]) for r in mlp[:2]] == [
        (2, 0, False),
        (2, 1, False),
    ]
    assert mlp[0].problem is None and "floating-point" in mlp[2].problem


def test_shapes_that_do_not_split_over_the_ranks_are_reported(tmp_path):
    runs = expand(
        write(
            tmp_path, {"primitive": "tp_columnwise", "m": [6, 8], "n": 4, "k": 4, "implementations": {"pytorch": [{}]}}
        ),
        world_size=4,
    )
    assert runs[0].problem == "m=6 is not divisible by the world size 4"
    assert runs[1].problem is None


def test_unknown_options_and_values_fail_the_run_not_the_config(tmp_path):
    runs = expand(
        write(
            tmp_path,
            {
                "primitive": "all_reduce",
                "message_bytes": 64,
                "implementations": {
                    "pytorch": [{"order": "AG_before"}, {"backend": "smoke_signals"}, {"device": "tpu"}]
                },
            },
        ),
        world_size=2,
    )
    assert "has no option 'order' for all_reduce" in runs[0].problem
    assert "backend 'smoke_signals' is not supported" in runs[1].problem
    assert "device=tpu is not one of cpu, cuda" in runs[2].problem


@pytest.mark.parametrize(
    "doc, where",
    [
        ({"benchmark": {"primitive": "gemm", "implementations": {}}}, "benchmark.primitive"),
        (
            {
                "benchmark": {
                    "primitive": "tp_columnwise",
                    "m": "many",
                    "n": 1,
                    "k": 1,
                    "implementations": {"pytorch": [{}]},
                }
            },
            "benchmark.m",
        ),
        (
            {"benchmark": {"primitive": "tp_columnwise", "n": 1, "k": 1, "implementations": {"pytorch": [{}]}}},
            "benchmark.m: missing",
        ),
        (
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 8,
                    "m": 4,
                    "implementations": {"pytorch": [{}]},
                }
            },
            "benchmark.m: all_reduce takes message_bytes",
        ),
        (
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 8,
                    "num_iterations": 0,
                    "implementations": {"pytorch": [{}]},
                }
            },
            "benchmark.num_iterations",
        ),
        (
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 8,
                    "dtype": "float8",
                    "implementations": {"pytorch": [{}]},
                }
            },
            "benchmark.dtype",
        ),
        (
            {
                "benchmark": {
                    "primitive": "all_reduce",
                    "message_bytes": 8,
                    "warmups": 3,
                    "implementations": {"pytorch": [{}]},
                }
            },
            "benchmark.warmups: unknown key",
        ),
        (
            {"benchmark": {"primitive": "all_reduce", "message_bytes": 8, "implementations": {"pytorch": {"a": 1}}}},
            None,
        ),
        (
            {"benchmark": {"primitive": "all_reduce", "message_bytes": 8, "implementations": []}},
            "benchmark.implementations",
        ),
        ([1, 2], "expected an object"),
    ],
)
def test_config_errors_name_the_file_and_the_key(tmp_path, doc, where):
    path = write(tmp_path, doc)
    if where is None:  # a single option object is taken as a list of one (DDLB's README writes lists)
        assert len(expand(path, world_size=2)) == 1
        return
    with pytest.raises(ConfigError) as e:
        expand(path, world_size=2)
    assert e.value.message.startswith(f"{path}: ") and where in e.value.message


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        expand(tmp_path / "absent.json", world_size=2)
    bad = tmp_path / "bad.json"
    bad.write_text('{"benchmark": {"primitive": "all_reduce",}}')
    with pytest.raises(ConfigError, match=r"bad.json: invalid JSON at line 1 column"):
        expand(bad, world_size=2)


def test_yaml_configs_are_read_too(tmp_path):
    path = write(
        tmp_path,
        "benchmark:\n  primitive: all_to_all\n  message_bytes: [64]\n  implementations:\n    compute_only: [{}]\n",
        "config.yaml",
    )
    (run,) = expand(path, world_size=2)
    assert (run.primitive, run.implementation, run.sizes) == ("all_to_all", "compute_only", {"message_bytes": 64})


def test_workload_names_are_safe_trace_ids_and_say_what_ran(tmp_path):
    runs = expand(
        write(
            tmp_path,
            {
                "primitive": "tp_columnwise",
                "m": 64,
                "n": 32,
                "k": 16,
                "implementations": {"pytorch": [{"backend": ["gloo", "ucc/tl/cuda"], "order": "AG_after"}]},
            },
        ),
        world_size=2,
    )
    names = [workload_name(r, 2) for r in runs]
    assert names[0] == "tp_columnwise-pytorch-gloo-AG_after-cpu-m64-n32-k16-float32-np2"
    assert names[1] == "tp_columnwise-pytorch-ucc_tl_cuda-AG_after-cpu-m64-n32-k16-float32-np2"
