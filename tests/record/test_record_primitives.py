"""The primitives' validation: the reference each check compares with, worked out here
independently, and a wrong output caught. In-process, no process group (the checks
need none). Needs torch (the `record` extra); skipped without it."""

from __future__ import annotations

import json
from pathlib import Path

from cclq.record.config import Run, expand


def make_run(tmp_path: Path, world_size: int = 2, **benchmark) -> Run:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"benchmark": benchmark}))
    (run,) = expand(path, world_size)
    return run


def test_tp_columnwise_check_accepts_the_product_and_catches_a_wrong_element(tmp_path, torch, primitives):
    run = make_run(
        tmp_path, primitive="tp_columnwise", m=8, n=4, k=6, implementations={"pytorch": [{"backend": "gloo"}]}
    )
    prim = primitives.build(run, rank=1, world_size=2, device=torch.device("cpu"))
    # every rank holds the same A and B; rank 1's shard is rows 4..7 of A
    assert torch.equal(prim.a, prim.a_full[4:8])
    product = prim.a_full @ prim.b_full
    assert prim.check(product) is None
    wrong = product.clone()
    wrong[3, 2] += 1.0  # far beyond DDLB's 1e-4 * k
    problem = prim.check(wrong)
    assert problem is not None and "1 of 32 elements" in problem


def test_tp_rowwise_reduce_scatter_keeps_this_ranks_rows_and_tolerates_bf16_rounding(tmp_path, torch, primitives):
    run = make_run(
        tmp_path,
        primitive="tp_rowwise",
        m=4,
        n=3,
        k=8,
        dtype="bfloat16",
        implementations={"pytorch": [{"backend": "gloo"}]},
    )
    prim = primitives.build(run, rank=0, world_size=2, device=torch.device("cpu"))
    exact = prim.a_full.double() @ prim.b_full.double()
    rows = exact[:2]  # rank 0 of 2 keeps rows 0..1
    assert prim.check(rows.to(torch.bfloat16)) is None  # the result's own rounding is allowed
    assert prim.check(exact.to(torch.bfloat16)) is not None  # all rows: wrong shape
    assert prim.check((rows + 0.5).to(torch.bfloat16)) is not None


def test_collective_references(tmp_path, torch, primitives):
    cases = {
        # rank 1 of 2, 8 float elements (32 bytes)
        "all_reduce": lambda x: x[0] + x[1],
        "all_gather": lambda x: torch.cat([x[0], x[1]]),
        "reduce_scatter": lambda x: (x[0] + x[1])[4:],
        "all_to_all": lambda x: torch.cat([x[0][4:], x[1][4:]]),
    }
    for primitive, expected in cases.items():
        run = make_run(tmp_path, primitive=primitive, message_bytes=32, implementations={"pytorch": [{}]})
        prim = primitives.build(run, rank=1, world_size=2, device=torch.device("cpu"))
        inputs = [prim.input_of(r) for r in range(2)]
        assert inputs[0].numel() == (4 if primitive == "all_gather" else 8)
        assert not torch.equal(inputs[0], inputs[1])
        want = expected(inputs)
        assert prim.check(want) is None, primitive
        off = want.clone()
        off[-1] += 1
        assert "1 of" in prim.check(off), primitive  # integer-valued data: exact comparison


def test_all_reduce_times_a_zero_buffer_and_validates_the_real_inputs(tmp_path, torch, primitives):
    run = make_run(
        tmp_path, primitive="all_reduce", message_bytes=64, dtype="float16", implementations={"pytorch": [{}]}
    )
    prim = primitives.build(run, rank=0, world_size=2, device=torch.device("cpu"))
    assert not prim.buffer.any()
    prim.prepare_validation()
    assert torch.equal(prim.buffer, prim.input_of(0))


def test_collective_compute_only_does_the_collectives_arithmetic(tmp_path, torch, primitives):
    for primitive in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        run = make_run(tmp_path, primitive=primitive, message_bytes=64, implementations={"compute_only": [{}]})
        prim = primitives.build(run, rank=1, world_size=2, device=torch.device("cpu"))
        assert prim.check(prim.run()) is None, primitive


def test_gradient_buckets_form_like_ddp(primitives):
    # parameters registered in order a(100), b(10), c(300), d(5) elements of 4 bytes;
    # backward produces d, c, b, a; a bucket closes at >= 1000 bytes
    mb = 1000 / 2**20
    assert primitives.gradient_buckets([100, 10, 300, 5], 4, mb) == [[3, 2], [1, 0]]
    assert primitives.gradient_buckets([100, 10, 300, 5], 4, 0) == [[3], [2], [1], [0]]
    assert primitives.gradient_buckets([100, 10, 300, 5], 4, 25) == [[3, 2, 1, 0]]


def test_dp_mlp_check_compares_with_the_mean_gradient_over_ranks(tmp_path, torch, primitives):
    run = make_run(
        tmp_path,
        primitive="dp_mlp",
        m=4,
        n=8,
        k=6,
        layers=2,
        implementations={"pytorch": [{"backend": "gloo", "bucket_mb": 0, "overlap": False}]},
    )
    prim = primitives.build(run, rank=0, world_size=2, device=torch.device("cpu"))
    # independently: the same model on each rank's batch, gradients averaged
    grads = []
    for rank in range(2):
        model = prim.build(run.seed)
        model(prim.batch_of(rank)).pow(2).mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    mean = [(g0 + g1) / 2 for g0, g1 in zip(*grads)]
    in_bucket_order = torch.cat([mean[i].flatten() for b in prim.buckets for i in b])
    assert prim.check(in_bucket_order) is None
    assert prim.check(torch.cat([g.flatten() for g in grads[0]])) is not None  # rank 0's own, not averaged
