"""The benchmarked primitives, one class per (primitive, implementation), with torch.

Every primitive builds its inputs from the run's seed (the same matrices on every
rank, as DDLB does, so each rank can compute the reference), does one iteration in
``run()``, and ``check()`` compares an output with the reference and says what is
wrong, or None. Tolerances are the dtype's:

* GEMMs (tp_columnwise, tp_rowwise): DDLB's ``atol * k`` with atol 1e-3 for
  float16/bfloat16 and 1e-4 otherwise (the error grows with the length of the dot
  products), plus the dtype's rounding of the result, eps x |reference| (DDLB's
  reference is itself rounded to the dtype; cclq's is computed in float64 from the
  same inputs, so an output of 4.0 in bfloat16 is 0.016 off by rounding alone);
  tp_rowwise rounds each rank's partial product too, so W + 1 roundings. Exact for
  integer dtypes.
* Plain collectives: inputs are small integers (-3..3), which every dtype holds
  exactly, and so do their sums over up to 64 ranks: the reference must match
  exactly. (The timed iterations of all_reduce run on a zero buffer, since an
  in-place sum repeated N times would grow every element W**N-fold and overflow;
  the validation iteration runs on the real inputs.)
* dp_mlp: the averaged gradients against a float64 computation of the gradient of
  the mean loss over every rank's batch; relative tolerance 1e-10 (float64), 1e-4
  (float32), 1e-2 (float16), 5e-2 (bfloat16), times the largest reference gradient.

``compute_only`` is the reference without communication: a GEMM's local product
(``size`` sharded: this rank's shard; unsharded: the whole problem, as DDLB), a
collective's arithmetic done locally on all ranks' inputs (the sum of all_reduce,
the copies of all_gather and all_to_all, the partial sums of reduce_scatter), and
dp_mlp's forward and backward without the all-reduce.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from cclq.record.config import Run

TORCH_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
}
# DDLB's GEMM tolerance per element of the dot product (tp_columnwise.validate)
_GEMM_ATOL = {"float16": 1e-3, "bfloat16": 1e-3, "float32": 1e-4, "float64": 1e-4}
_GRAD_RTOL = {"float64": 1e-10, "float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _uniform(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """DDLB's inputs: uniform in [-1, 1] (small integers for integer dtypes), on the CPU."""
    if dtype.is_floating_point:
        return (2 * torch.rand(shape, generator=_generator(seed), dtype=torch.float32) - 1).to(dtype)
    return torch.randint(-2, 3, shape, generator=_generator(seed), dtype=dtype)


def _small_ints(numel: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    return torch.randint(-3, 4, (numel,), generator=_generator(seed), dtype=torch.int64).to(dtype)


def _grad_of(param: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient, which backward() has set by the time it is read."""
    assert param.grad is not None, "gradient read before backward()"
    return param.grad


def _compare(out: torch.Tensor, ref: torch.Tensor, atol: float, what: str, rtol: float = 0.0) -> str | None:
    """None when every element is within ``atol + rtol * |ref|``; else the worst
    element, in words."""
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    if out64.shape != ref64.shape:
        return f"{what}: shape {tuple(out64.shape)}, expected {tuple(ref64.shape)}"
    if out64.numel() == 0:
        return None
    excess = (out64 - ref64).abs() - (atol + rtol * ref64.abs())
    bad = torch.isnan(excess) | (excess > 0)
    if not bool(bad.any()):
        return None
    worst = int(torch.nan_to_num(excess, nan=float("inf")).argmax())
    bound = f"{atol:g}" + (f" + {rtol:g} x |reference|" if rtol else "")
    return (
        f"{what}: {int(bad.sum())} of {excess.numel()} elements differ from the reference by more than "
        f"{bound} (worst: {float(out64.flatten()[worst]):g} vs {float(ref64.flatten()[worst]):g})"
    )


class Primitive:
    """One iteration of a benchmarked operation on one rank."""

    def __init__(self, run: Run, rank: int, world_size: int, device: torch.device) -> None:
        self.run_spec = run
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.dtype = TORCH_DTYPES[run.dtype]
        self.options = run.options

    def run(self) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare_validation(self) -> None:
        """Puts the real inputs back where timing may have used others (see all_reduce)."""

    def check(self, out: torch.Tensor) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError


# ------------------------------------------------------------------------ GEMMs
class _Gemm(Primitive):
    """A [m, k] @ B [k, n], A and B the same on every rank (seeded)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        s = self.run_spec.sizes
        self.m, self.n, self.k = s["m"], s["n"], s["k"]
        seed = self.run_spec.seed
        self.a_full = _uniform((self.m, self.k), self.dtype, seed)
        self.b_full = _uniform((self.k, self.n), self.dtype, seed + 1)

    def reference(self) -> torch.Tensor:
        return self.a_full.to(torch.float64) @ self.b_full.to(torch.float64)

    def tolerance(self, roundings: int = 1) -> dict[str, float]:
        """DDLB's ``atol * k`` for the dot products, plus the rounding of the result
        to the dtype (``roundings`` times: the partial products of tp_rowwise are
        each rounded before the ranks sum them) relative to its size."""
        base = _GEMM_ATOL.get(self.run_spec.dtype, 0.0)
        eps = torch.finfo(self.dtype).eps if self.dtype.is_floating_point else 0.0
        return {"atol": base * self.k, "rtol": eps * roundings}

    def rows(self, t: torch.Tensor) -> torch.Tensor:
        """This rank's block of rows of an [m, ...] tensor."""
        chunk = self.m // self.world_size
        return t[self.rank * chunk : (self.rank + 1) * chunk]


class TPColumnwise(_Gemm):
    """DDLB's tp_columnwise: A row-sharded [m/W, k], B replicated; all-gather + GEMM.
    order AG_before gathers A then multiplies; AG_after multiplies the shard, then
    gathers C."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.a = self.rows(self.a_full).contiguous().to(self.device)
        self.b = self.b_full.to(self.device)
        if self.options["order"] == "AG_before":
            self.gathered = torch.empty(self.m, self.k, dtype=self.dtype, device=self.device)
        else:
            self.gathered = torch.empty(self.m, self.n, dtype=self.dtype, device=self.device)

    def run(self) -> torch.Tensor:
        if self.options["order"] == "AG_before":
            dist.all_gather_into_tensor(self.gathered, self.a)
            return torch.matmul(self.gathered, self.b)
        dist.all_gather_into_tensor(self.gathered, torch.matmul(self.a, self.b))
        return self.gathered

    def check(self, out: torch.Tensor) -> str | None:
        return _compare(out, self.reference(), what="C = A @ B", **self.tolerance())


class TPRowwise(_Gemm):
    """tp_rowwise: A column-sharded [m, k/W], B row-sharded [k/W, n]; the partial
    products are summed by reduce-scatter (each rank keeps its [m/W, n] rows, DDLB's
    sequence-parallel form) or all-reduce (every rank keeps all of C, Megatron's
    row-parallel linear)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        kc = self.k // self.world_size
        cols = slice(self.rank * kc, (self.rank + 1) * kc)
        self.a = self.a_full[:, cols].contiguous().to(self.device)
        self.b = self.b_full[cols].contiguous().to(self.device)
        self.scatter = self.options["collective"] == "reduce_scatter"
        if self.scatter:
            self.out = torch.empty(self.m // self.world_size, self.n, dtype=self.dtype, device=self.device)

    def run(self) -> torch.Tensor:
        partial = torch.matmul(self.a, self.b)
        if self.scatter:
            dist.reduce_scatter_tensor(self.out, partial)
            return self.out
        dist.all_reduce(partial)
        return partial

    def check(self, out: torch.Tensor) -> str | None:
        ref = self.reference()
        return _compare(
            out,
            self.rows(ref) if self.scatter else ref,
            what="C = A @ B",
            **self.tolerance(roundings=self.world_size + 1),
        )


class GemmComputeOnly(_Gemm):
    """The GEMM without communication: this rank's product (sharded), or all of A @ B."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.sharded = self.options["size"] == "sharded"
        a, b = self.a_full, self.b_full
        if self.sharded and self.run_spec.primitive == "tp_columnwise":
            a = self.rows(a)
        elif self.sharded:  # tp_rowwise: the partial product of this rank's k-slice
            kc = self.k // self.world_size
            a, b = a[:, self.rank * kc : (self.rank + 1) * kc], b[self.rank * kc : (self.rank + 1) * kc]
        self.a = a.contiguous().to(self.device)
        self.b = b.contiguous().to(self.device)

    def run(self) -> torch.Tensor:
        return torch.matmul(self.a, self.b)

    def check(self, out: torch.Tensor) -> str | None:
        ref = self.a.to("cpu", torch.float64) @ self.b.to("cpu", torch.float64)
        return _compare(out, ref, what="local A @ B", **self.tolerance())


# ------------------------------------------------------------------ collectives
class _Collective(Primitive):
    """A collective over a ``message_bytes`` buffer (nccl-tests' size: all_gather's
    output, reduce_scatter's input). Rank r's input is _small_ints(seed + r)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.numel = self.run_spec.sizes["message_bytes"] // self.run_spec.elem_bytes
        self.chunk = self.numel // self.world_size

    def input_of(self, rank: int) -> torch.Tensor:
        """Rank ``rank``'s input (all_gather: its contribution of numel / W)."""
        n = self.chunk if self.run_spec.primitive == "all_gather" else self.numel
        return _small_ints(n, self.dtype, self.run_spec.seed + rank)

    def expected(self) -> torch.Tensor:
        ins = [self.input_of(r).to(torch.float64) for r in range(self.world_size)]
        primitive = self.run_spec.primitive
        if primitive == "all_reduce":
            return torch.stack(ins).sum(0)
        if primitive == "all_gather":
            return torch.cat(ins)
        mine = slice(self.rank * self.chunk, (self.rank + 1) * self.chunk)
        if primitive == "reduce_scatter":
            return torch.stack(ins).sum(0)[mine]
        return torch.cat([x[mine] for x in ins])  # all_to_all: chunk r of every rank, in rank order

    def check(self, out: torch.Tensor) -> str | None:
        return _compare(out, self.expected(), 0.0, self.run_spec.primitive)


class PyTorchCollective(_Collective):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.input = self.input_of(self.rank).to(self.device)
        primitive = self.run_spec.primitive
        out_numel = {"all_reduce": 0, "all_gather": self.numel, "reduce_scatter": self.chunk, "all_to_all": self.numel}[
            primitive
        ]
        self.out = torch.empty(out_numel, dtype=self.dtype, device=self.device)
        if primitive == "all_reduce":
            self.buffer = torch.zeros(self.numel, dtype=self.dtype, device=self.device)
        self.call: Callable[[], torch.Tensor] = getattr(self, "_" + primitive)

    def _all_reduce(self) -> torch.Tensor:
        dist.all_reduce(self.buffer)
        return self.buffer

    def _all_gather(self) -> torch.Tensor:
        dist.all_gather_into_tensor(self.out, self.input)
        return self.out

    def _reduce_scatter(self) -> torch.Tensor:
        dist.reduce_scatter_tensor(self.out, self.input)
        return self.out

    def _all_to_all(self) -> torch.Tensor:
        dist.all_to_all_single(self.out, self.input)
        return self.out

    def run(self) -> torch.Tensor:
        return self.call()

    def prepare_validation(self) -> None:
        if self.run_spec.primitive == "all_reduce":
            self.buffer.copy_(self.input)


class CollectiveComputeOnly(_Collective):
    """The collective's arithmetic on one device, all ranks' inputs held locally."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.inputs = torch.stack([self.input_of(r) for r in range(self.world_size)]).to(self.device)
        primitive = self.run_spec.primitive
        self.out = torch.empty(
            self.chunk if primitive == "reduce_scatter" else self.numel, dtype=self.dtype, device=self.device
        )

    def run(self) -> torch.Tensor:
        primitive = self.run_spec.primitive
        if primitive == "all_reduce":
            return torch.sum(self.inputs, 0, out=self.out)
        if primitive == "all_gather":
            return self.out.copy_(self.inputs.view(-1))
        mine = slice(self.rank * self.chunk, (self.rank + 1) * self.chunk)
        if primitive == "reduce_scatter":
            return torch.sum(self.inputs[:, mine], 0, out=self.out)
        self.out.view(self.world_size, self.chunk).copy_(self.inputs[:, mine])
        return self.out


# ----------------------------------------------------------------------- dp_mlp
def mlp_layer_shapes(k: int, n: int, layers: int) -> list[tuple[int, int]]:
    """(in, out) of each Linear: k -> n, then n -> n."""
    return [(k, n)] + [(n, n)] * (layers - 1)


def gradient_buckets(param_numels: list[int], elem_bytes: int, bucket_mb: float) -> list[list[int]]:
    """Indices of the parameters in each all-reduce bucket, as DDP forms them: in
    reverse order of registration (the order backward produces gradients), a bucket
    closed once it holds at least ``bucket_mb`` MB (2**20 bytes); 0 gives one bucket
    per parameter tensor."""
    cap = bucket_mb * 2**20
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in reversed(range(len(param_numels))):
        current.append(i)
        size += param_numels[i] * elem_bytes
        if size >= cap:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class _DataParallelMLP(Primitive):
    """A small MLP (Linear + ReLU, ``layers`` deep, biases included) trained data
    parallel: each rank runs forward and backward on its own batch of ``m`` rows of
    ``k`` features, loss = mean of the squared outputs. No optimizer update, so
    every iteration does the same work."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        s = self.run_spec.sizes
        self.m, self.n, self.k, self.layers = s["m"], s["n"], s["k"], s["layers"]
        self.model = self.build(self.run_spec.seed).to(self.device, self.dtype)
        self.params = list(self.model.parameters())
        self.x = self.batch_of(self.rank).to(self.device, self.dtype)

    def build(self, seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        mods: list[torch.nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(mlp_layer_shapes(self.k, self.n, self.layers)):
            if i:
                mods.append(torch.nn.ReLU())
            mods.append(torch.nn.Linear(fan_in, fan_out))
        return torch.nn.Sequential(*mods)

    def batch_of(self, rank: int) -> torch.Tensor:
        return _uniform((self.m, self.k), torch.float32, self.run_spec.seed + 1000 + rank)

    def forward_backward(self) -> None:
        for p in self.params:
            p.grad = None
        self.model(self.x).float().pow(2).mean().backward()

    def reference_grads(self, ranks: list[int]) -> torch.Tensor:
        """float64 gradient of the mean over ``ranks`` of each rank's loss."""
        ref = self.build(self.run_spec.seed).to(torch.float64)
        # start from the same (rounded) weights as the benchmarked model
        with torch.no_grad():
            for p_ref, p in zip(ref.parameters(), self.params):
                p_ref.copy_(p.detach().to("cpu", torch.float64))
        loss = sum(ref(self.batch_of(r).to(self.dtype).to(torch.float64)).pow(2).mean() for r in ranks)
        (loss / len(ranks)).backward()
        return torch.cat([_grad_of(p).flatten() for p in ref.parameters()])

    def flat_grads(self) -> torch.Tensor:
        return torch.cat([_grad_of(p).flatten() for p in self.params])

    def compare_grads(self, out: torch.Tensor, ref: torch.Tensor) -> str | None:
        atol = _GRAD_RTOL[self.run_spec.dtype] * float(ref.abs().max())
        return _compare(out, ref, atol, "gradients")


class PyTorchDataParallelMLP(_DataParallelMLP):
    """Gradients all-reduced in buckets (tensor fusion up to ``bucket_mb``), either as
    soon as backward has produced a bucket (``overlap``: wait-free backpropagation,
    the all-reduce runs while backward goes on) or after the whole backward pass."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        numels = [p.numel() for p in self.params]
        self.buckets = gradient_buckets(numels, self.run_spec.elem_bytes, float(self.options["bucket_mb"]))
        self.flats = [
            torch.empty(sum(numels[i] for i in b), dtype=self.dtype, device=self.device) for b in self.buckets
        ]
        self.bucket_of = {i: bi for bi, b in enumerate(self.buckets) for i in b}
        self.pending: list[int] = []
        self.handles: list[dist.Work] = []
        if self.options["overlap"]:
            for i, p in enumerate(self.params):
                p.register_post_accumulate_grad_hook(self._hook(i))

    def _hook(self, index: int) -> Callable[[torch.Tensor], None]:
        def ready(_: torch.Tensor) -> None:
            bi = self.bucket_of[index]
            self.pending[bi] -= 1
            if self.pending[bi] == 0:
                self.handles.append(self._launch(bi, async_op=True))

        return ready

    def _launch(self, bi: int, async_op: bool) -> dist.Work:
        torch.cat([_grad_of(self.params[i]).flatten() for i in self.buckets[bi]], out=self.flats[bi])
        return dist.all_reduce(self.flats[bi], async_op=async_op)

    def run(self) -> torch.Tensor:
        self.pending = [len(b) for b in self.buckets]
        self.handles = []
        self.forward_backward()
        if self.options["overlap"]:
            for h in self.handles:
                h.wait()
        else:
            for bi in range(len(self.buckets)):
                self._launch(bi, async_op=False)
        for flat in self.flats:
            flat.div_(self.world_size)
        return torch.cat(self.flats)

    def check(self, out: torch.Tensor) -> str | None:
        ref = self.reference_grads(list(range(self.world_size)))
        order = [i for b in self.buckets for i in b]  # the flats hold parameters in bucket order
        pieces = torch.split(ref, [p.numel() for p in self.params])
        return self.compare_grads(out, torch.cat([pieces[i] for i in order]))


class DataParallelMLPComputeOnly(_DataParallelMLP):
    """Forward and backward on this rank's batch, gradients left local."""

    def run(self) -> torch.Tensor:
        self.forward_backward()
        return self.flat_grads()

    def check(self, out: torch.Tensor) -> str | None:
        return self.compare_grads(out, self.reference_grads([self.rank]))


IMPLEMENTATIONS: dict[tuple[str, str], type[Primitive]] = {
    ("tp_columnwise", "pytorch"): TPColumnwise,
    ("tp_rowwise", "pytorch"): TPRowwise,
    ("tp_columnwise", "compute_only"): GemmComputeOnly,
    ("tp_rowwise", "compute_only"): GemmComputeOnly,
    ("all_reduce", "pytorch"): PyTorchCollective,
    ("all_gather", "pytorch"): PyTorchCollective,
    ("reduce_scatter", "pytorch"): PyTorchCollective,
    ("all_to_all", "pytorch"): PyTorchCollective,
    ("all_reduce", "compute_only"): CollectiveComputeOnly,
    ("all_gather", "compute_only"): CollectiveComputeOnly,
    ("reduce_scatter", "compute_only"): CollectiveComputeOnly,
    ("all_to_all", "compute_only"): CollectiveComputeOnly,
    ("dp_mlp", "pytorch"): PyTorchDataParallelMLP,
    ("dp_mlp", "compute_only"): DataParallelMLPComputeOnly,
}


def build(run: Run, rank: int, world_size: int, device: torch.device) -> Primitive:
    return IMPLEMENTATIONS[(run.primitive, run.implementation)](run, rank, world_size, device)
