"""Realistic multi-rank Kineto training traces of any size, streamed straight to disk
(memory stays flat however large the file), for benchmarks and smoke tests:
``generate_rank_trace`` (one rank) and ``generate_workload`` (a workload folder). The
events are %-formatted templates in Kineto's own key order (``cclq.synth.kineto_json``
for what they share with the hand-placed builder). Pure standard library."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cclq.synth.kineto_json import (
    DEFAULT_BASE_TIME_NS,
    DEFAULT_GEN_START_NS,
    MEMCPY_NAMES,
    TIME_FORMS,
    kineto_device_properties,
    kineto_distributed_info,
    kineto_footer,
    kineto_header,
    n_visible_devices,
    nccl_kernel_name,
    occupancy,
    open_text,
    pg_entry,
    us_text,
)

# 2. Streamed realistic generator
# --------------------------------------------------------------------------------------

# Event templates (Kineto's own key order and spacing). The hot path only %-formats these.
_T_X = '{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, "args": {%s}}'
_T_OP_ARGS = '"External id": %d, "Record function id": 0, "Sequence number": %d, "Fwd thread id": 0%s, "Ev Idx": %d'
_T_PY_ARGS = '"Python parent id": %d, "Python id": %d, "Ev Idx": %d'
_T_RT_ARGS = '"External id": %d, "cbid": %d, "correlation": %d'
_T_FLOW_S = '{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "%s", "name": "%s"}'
_T_FLOW_F = '{"ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "%s", "name": "%s", "bp": "e"}'
_T_KERNEL = (
    '{"ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d, "ts": %s, '
    '"dur": %s, "args": {"External id": %d, "queued": 0, "device": %d, "context": 1, '
    '"stream": %d, "correlation": %d, %s%s}}'
)
_T_MEM = (
    '{"ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, '
    '"args": {"External id": %d, "device": %d, "context": 1, "stream": %d, '
    '"correlation": %d, "bytes": %d, "memory bandwidth (GB/s)": %s}}'
)
_T_GPU_ANN = (
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "%s", "pid": %d, "tid": %d, '
    '"ts": %s, "dur": %s, "args": {"External id": %d}}'
)


def _kprof(regs: int, smem: int, grid: list[int], block: list[int]) -> str:
    """The fixed launch-config part of a kernel's args."""
    bps, wps, occ = occupancy(grid, block)
    return (
        '"registers per thread": %d, "shared memory": %d, "blocks per SM": %s, '
        '"warps per SM": %s, "grid": %s, "block": %s, "est. achieved occupancy %%": %d'
        % (regs, smem, json.dumps(bps), json.dumps(wps), json.dumps(grid), json.dumps(block), occ)
    )


_GEMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_%s_n_tilesize128x128x64_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas"
)
_K_GEMM_FWD = _GEMM % "tn"
_K_GEMM_DGRAD = _GEMM % "nn"
_K_GEMM_WGRAD = _GEMM % "nt"
_K_RELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#14}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
    "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
    "() const::{lambda()#14}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2>)"
)
_K_THRESH = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "threshold_kernel_impl<c10::BFloat16>(at::TensorIteratorBase&, c10::BFloat16, "
    "c10::BFloat16)::{lambda(c10::BFloat16, c10::BFloat16)#1}, at::detail::Array<char*, 3> "
    ">(int, at::native::(anonymous namespace)::threshold_kernel_impl<c10::BFloat16>("
    "at::TensorIteratorBase&, c10::BFloat16, c10::BFloat16)::{lambda(c10::BFloat16, "
    "c10::BFloat16)#1}, at::detail::Array<char*, 3>)"
)
_K_LOSS = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps"
    "<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"
)
_K_ADAM = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
    "(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
    "double*, double, double, double, double, double, bool, double*, double*>(at::native::"
    "(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
    "double*, double, double, double, double, double, bool, double*, double*)"
)
_K_NCCL_AR = nccl_kernel_name("AllReduce", "BFloat16")

_P_GEMM = _kprof(168, 197632, [64, 32, 1], [384, 1, 1])
_P_ELEM = _kprof(18, 0, [65536, 1, 1], [128, 1, 1])
_P_LOSS = _kprof(32, 16, [132, 1, 1], [512, 1, 1])
_P_ADAM = _kprof(96, 0, [1320, 1, 1], [512, 1, 1])
_P_NCCL = _kprof(96, 87568, [16, 1, 1], [512, 1, 1])

# Model shape: tokens x hidden activations, hidden x hidden weights (bf16).
_TOKENS = 8 * 1024
_HIDDEN = 4096
_LAYER_NELEMS = _HIDDEN * _HIDDEN + _HIDDEN
_BUCKET_LAYERS = 2  # DDP bucket: all-reduce after every two layers' gradients
_BF16 = '"Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]'
_A_LINEAR = ', "Input Dims": [[%d, %d], [%d, %d], [%d]], %s' % (_TOKENS, _HIDDEN, _HIDDEN, _HIDDEN, _HIDDEN, _BF16)
_A_ADDMM = (
    ', "Input Dims": [[%d], [%d, %d], [%d, %d], [], []], "Input type": ["c10::BFloat16", '
    '"c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]' % (_HIDDEN, _TOKENS, _HIDDEN, _HIDDEN, _HIDDEN)
)
_A_T = ', "Input Dims": [[%d, %d]], "Input type": ["c10::BFloat16"]' % (_HIDDEN, _HIDDEN)
_A_ACT = ', "Input Dims": [[%d, %d]], "Input type": ["c10::BFloat16"]' % (_TOKENS, _HIDDEN)
_A_MM = ', "Input Dims": [[%d, %d], [%d, %d]], "Input type": ["c10::BFloat16", "c10::BFloat16"]' % (
    _TOKENS,
    _HIDDEN,
    _HIDDEN,
    _HIDDEN,
)
_A_THRESH = ', "Input Dims": [[%d, %d], [%d, %d], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]' % (
    _TOKENS,
    _HIDDEN,
    _TOKENS,
    _HIDDEN,
)
_A_LOSS = ', "Input Dims": [[%d, %d], [%d, %d], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]' % (
    _TOKENS,
    _HIDDEN,
    _TOKENS,
    _HIDDEN,
)
_A_TO = (
    ', "Input Dims": [[8, 1024], [], [], [], [], [], [], []], "Input type": ["long int", '
    '"Scalar", "Scalar", "", "", "Scalar", "Scalar", ""]'
)
_A_ITEM = ', "Input Dims": [[]], "Input type": ["float"]'
_A_NONE = ""


class _RankSim:
    """Simulates one rank's CPU threads and GPU streams step by step, yielding event text.

    Only the current step's events are held; everything else is a handful of counters.
    """

    def __init__(self, rank: int, world_size: int, layers: int, seed: int, start_ns: int) -> None:
        self.us = us_text  # the time text (TIME_FORMS)
        self.rng = random.Random(seed + rank)
        r = self.rng
        self.rank = rank
        self.world_size = world_size
        self.layers = layers
        self.device = rank % 8
        self.pid = 2000 + 17 * rank
        self.tid = self.pid
        self.bwd_tid = self.pid + 311
        self.speed = 1.0 + r.uniform(-0.04, 0.04)  # per-rank GPU speed difference
        self.t = start_ns + r.randint(0, 400_000)  # per-rank start skew, up to 0.4 ms
        self.gpu7 = self.t
        self.gpu20 = self.t
        self.t_min = self.t
        self.t_max = self.t
        self.ext = 0
        self.corr = 0
        self.seqnr = 0
        self.evidx = 0
        self.pyid = 0
        self.fwdbwd = 0
        self.coll_seq = 0
        self.pg_ranks = str(list(range(world_size)))
        self.ev: list[str] = []
        self.gpu: list[str] = []
        self.first7: int | None = None

    # -- primitives (append to the current step's lists) -------------------------------
    def jit(self, base: int) -> int:
        return int(base * (0.9 + 0.2 * self.rng.random()))

    def open_x(self) -> int:
        self.ev.append("")
        return len(self.ev) - 1

    def close_op(
        self, idx: int, name: str, tid: int, ts: int, ext: int, seq: int, extra: str, evidx: int, cat: str = "cpu_op"
    ) -> None:
        self.ev[idx] = _T_X % (
            cat,
            name,
            self.pid,
            tid,
            self.us(ts),
            self.us(self.t - ts),
            _T_OP_ARGS % (ext, seq, extra, evidx),
        )

    def op(self, name: str, tid: int, extra: str = _A_NONE, seq: int | None = None) -> tuple[int, Callable[[], int]]:
        """Starts a cpu_op; returns a closer to call when its children are done."""
        self.t += self.jit(3_000)
        self.ext += 1
        self.evidx += 1
        if seq is None:
            self.seqnr += 1
            seq = self.seqnr
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx

        def close() -> int:
            self.t += self.jit(1_500)
            self.close_op(idx, name, tid, ts, ext, seq, extra, evidx)
            return ext

        return ext, close

    def annotation(self, name: str, tid: int) -> tuple[int, int, Callable[[], int]]:
        self.ext += 1
        self.evidx += 1
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx

        def close() -> int:
            self.ev[idx] = _T_X % (
                "user_annotation",
                name,
                self.pid,
                tid,
                self.us(ts),
                self.us(self.t - ts),
                '"External id": %d, "Record function id": 0, "Ev Idx": %d' % (ext, evidx),
            )
            return ext

        return ext, ts, close

    def py(self, name: str, tid: int, parent: int) -> tuple[int, Callable[[], None]]:
        self.t += self.jit(1_000)
        self.pyid += 1
        self.evidx += 1
        idx, ts, pyid, evidx = self.open_x(), self.t, self.pyid, self.evidx

        def close() -> None:
            self.t += self.jit(800)
            self.ev[idx] = _T_X % (
                "python_function",
                name,
                self.pid,
                tid,
                self.us(ts),
                self.us(self.t - ts),
                _T_PY_ARGS % (parent, pyid, evidx),
            )

        return pyid, close

    def launch(
        self,
        tid: int,
        ext: int,
        kname: str,
        prof: str,
        kdur: int,
        stream: int = 7,
        ready: int = 0,
        api: str = "cudaLaunchKernel",
        cbid: int = 211,
        kextra: str = "",
    ) -> tuple[int, int]:
        """Runtime launch + flow + kernel; returns the kernel's (start, end)."""
        self.t += self.jit(2_000)
        self.corr += 1
        corr = self.corr
        lts, ldur = self.t, self.jit(5_500)
        ev = self.ev
        ev.append(
            _T_X % ("cuda_runtime", api, self.pid, tid, self.us(lts), self.us(ldur), _T_RT_ARGS % (ext, cbid, corr))
        )
        ev.append(_T_FLOW_S % (corr, self.pid, tid, self.us(lts), "ac2g", "ac2g"))
        self.t = lts + ldur
        earliest = lts + self.jit(4_000)
        if stream == 7:
            ks = max(self.gpu7 + self.jit(1_500), earliest, ready)
        else:
            ks = max(self.gpu20 + self.jit(2_000), earliest, ready)
        kd = int(kdur * self.speed * (0.96 + 0.08 * self.rng.random()))
        ke = ks + kd
        if stream == 7:
            self.gpu7 = ke
            if self.first7 is None:
                self.first7 = ks
        else:
            self.gpu20 = ke
        sks = self.us(ks)
        self.gpu.append(_T_FLOW_F % (corr, self.device, stream, sks, "ac2g", "ac2g"))
        self.gpu.append(
            _T_KERNEL % (kname, self.device, stream, sks, self.us(kd), ext, self.device, stream, corr, prof, kextra)
        )
        return ks, ke

    def copy(self, tid: int, ext: int, kind: str, nbytes: int, kdur: int) -> int:
        """cudaMemcpyAsync + flow + gpu_memcpy on stream 7; returns the copy's end."""
        self.t += self.jit(2_000)
        self.corr += 1
        corr = self.corr
        lts, ldur = self.t, self.jit(9_000)
        self.ev.append(
            _T_X
            % (
                "cuda_runtime",
                "cudaMemcpyAsync",
                self.pid,
                tid,
                self.us(lts),
                self.us(ldur),
                _T_RT_ARGS % (ext, 41, corr),
            )
        )
        self.ev.append(_T_FLOW_S % (corr, self.pid, tid, self.us(lts), "ac2g", "ac2g"))
        self.t = lts + ldur
        ks = max(self.gpu7 + self.jit(1_500), lts + self.jit(3_000))
        kd = self.jit(kdur)
        self.gpu7 = ks + kd
        if self.first7 is None:
            self.first7 = ks
        self.gpu.append(_T_FLOW_F % (corr, self.device, 7, self.us(ks), "ac2g", "ac2g"))
        self.gpu.append(
            _T_MEM
            % (
                "gpu_memcpy",
                MEMCPY_NAMES[kind],
                self.device,
                7,
                self.us(ks),
                self.us(kd),
                ext,
                self.device,
                7,
                corr,
                nbytes,
                repr(nbytes / kd),
            )
        )
        return ks + kd

    def runtime(self, tid: int, ext: int, name: str, cbid: int, dur: int) -> None:
        self.t += self.jit(1_500)
        self.corr += 1
        self.ev.append(
            _T_X
            % ("cuda_runtime", name, self.pid, tid, self.us(self.t), self.us(dur), _T_RT_ARGS % (ext, cbid, self.corr))
        )
        self.t += dur

    # -- one training step -------------------------------------------------------------
    def step(self, n: int) -> list[str]:
        self.ev, self.gpu, self.first7 = [], [], None
        tid, btid = self.tid, self.bwd_tid
        self.t += self.jit(60_000)  # dataloader / python between steps
        step_ext, step_ts, close_step = self.annotation(f"ProfilerStep#{n}", tid)
        py_step, close_py_step = self.py("train.py(87): train_step", tid, 0)

        # Input batch to the GPU.
        ext, close = self.op("aten::to", tid, _A_TO)
        ext2, close2 = self.op("aten::_to_copy", tid, _A_TO)
        ext3, close3 = self.op("aten::copy_", tid)
        self.copy(tid, ext3, "HtoD", 8 * 1024 * 8, 9_000)
        close3(), close2(), close()

        # Forward.
        fwd_seq: list[int] = []
        fwd_flow: list[int] = []
        py_model, close_model = self.py("nn.Module: SyntheticMLP_0", tid, py_step)
        for layer in range(self.layers):
            py_l, close_l = self.py(f"nn.Module: Linear_{layer}", tid, py_model)
            ext, close_lin = self.op("aten::linear", tid, _A_LINEAR)
            ext_t, close_t = self.op("aten::t", tid, _A_T)
            close_t()
            ext_mm, close_mm = self.op("aten::addmm", tid, _A_ADDMM)
            fwd_seq.append(self.seqnr)
            self.fwdbwd += 1
            fwd_flow.append(self.fwdbwd)
            self.ev.append(_T_FLOW_S % (self.fwdbwd, self.pid, tid, self.us(self.t), "fwdbwd", "fwdbwd"))
            self.launch(tid, ext_mm, _K_GEMM_FWD, _P_GEMM, 640_000)
            close_mm(), close_lin(), close_l()
            ext_r, close_r = self.op("aten::relu", tid, _A_ACT)
            self.launch(tid, ext_r, _K_RELU, _P_ELEM, 58_000)
            close_r()
        close_model()
        ext, close = self.op("aten::mse_loss", tid, _A_LOSS)
        self.launch(tid, ext, _K_LOSS, _P_LOSS, 41_000)
        close()

        # Backward on the autograd thread, while the main thread waits in backward().
        py_bw, close_bw = self.py("torch/_tensor.py(626): backward", tid, py_step)
        main_t = self.t
        self.t += self.jit(12_000)
        bucket_nelems, bucket_n, grad_ready = 0, 0, 0
        for layer in reversed(range(self.layers)):
            seq = fwd_seq[layer]
            ext, close_e = self.op("autograd::engine::evaluate_function: ReluBackward0", btid, seq=seq + 1)
            ext2, close2 = self.op("ReluBackward0", btid, seq=seq + 1)
            ext3, close3 = self.op("aten::threshold_backward", btid, _A_THRESH)
            self.launch(btid, ext3, _K_THRESH, _P_ELEM, 86_000)
            close3(), close2(), close_e()
            ext, close_e = self.op("autograd::engine::evaluate_function: AddmmBackward0", btid, seq=seq)
            self.ev.append(_T_FLOW_F % (fwd_flow[layer], self.pid, btid, self.us(self.t), "fwdbwd", "fwdbwd"))
            ext2, close2 = self.op("AddmmBackward0", btid, seq=seq)
            if layer > 0:
                ext3, close3 = self.op("aten::mm", btid, _A_MM)
                self.launch(btid, ext3, _K_GEMM_DGRAD, _P_GEMM, 650_000)
                close3()
            ext3, close3 = self.op("aten::mm", btid, _A_MM)
            _, grad_ready = self.launch(btid, ext3, _K_GEMM_WGRAD, _P_GEMM, 660_000)
            close3(), close2(), close_e()
            bucket_nelems += _LAYER_NELEMS
            bucket_n += 1
            if bucket_n == _BUCKET_LAYERS or layer == 0:
                self.allreduce(btid, bucket_nelems, grad_ready)
                bucket_nelems, bucket_n = 0, 0
        self.t = max(self.t, main_t) + self.jit(8_000)
        close_bw()

        # Optimizer: waits for the last all-reduce (cudaStreamWaitEvent), then fused AdamW.
        ext_o, _, close_o = self.annotation("Optimizer.step#AdamW.step", tid)
        ext, close = self.op("aten::_fused_adamw_", tid)
        self.runtime(tid, ext, "cudaStreamWaitEvent", 147, self.jit(2_000))
        self.launch(tid, ext, _K_ADAM, _P_ADAM, 95_000 * self.layers, ready=self.gpu20)
        close()
        self.t += self.jit(4_000)
        close_o()
        ext_z, _, close_z = self.annotation("Optimizer.zero_grad#AdamW.zero_grad", tid)
        self.t += self.jit(25_000)
        close_z()

        # loss.item(): a small DtoH copy, then the CPU blocks until the GPU catches up.
        ext, close = self.op("aten::item", tid, _A_ITEM)
        ext2, close2 = self.op("aten::_local_scalar_dense", tid, _A_ITEM)
        copy_end = self.copy(tid, ext2, "DtoH", 4, 2_000)
        sync_ts = self.t + self.jit(1_500)
        self.corr += 1
        sync_end = max(sync_ts + 2_000, copy_end + self.jit(3_000))
        self.ev.append(
            _T_X
            % (
                "cuda_runtime",
                "cudaStreamSynchronize",
                self.pid,
                tid,
                self.us(sync_ts),
                self.us(sync_end - sync_ts),
                _T_RT_ARGS % (ext2, 131, self.corr),
            )
        )
        self.t = sync_end
        close2(), close()
        close_py_step()
        self.t += self.jit(5_000)
        close_step()

        g0 = self.first7 if self.first7 is not None else step_ts
        g1 = max(self.gpu7, g0)
        # Kineto shifts gpu_user_annotation by -1 ns / +2 ns.
        self.gpu.append(
            _T_GPU_ANN % (f"ProfilerStep#{n}", self.device, 7, self.us(g0 - 1), self.us(g1 - g0 + 2), step_ext)
        )
        self.t_max = max(self.t_max, self.t, self.gpu7, self.gpu20)
        out = self.ev
        out.extend(self.gpu)
        self.ev, self.gpu = [], []
        return out

    def allreduce(self, tid: int, nelems: int, ready: int) -> None:
        """DDP bucket all-reduce: record_param_comms + nccl:all_reduce + NCCL kernel on 20."""
        seq = self.coll_seq
        self.coll_seq += 1
        ws = self.world_size
        self.t += self.jit(4_000)
        self.ext += 1
        self.evidx += 1
        idx, ts, ext, evidx = self.open_x(), self.t, self.ext, self.evidx
        ext_a, ts_a, close_a = self.annotation("nccl:all_reduce", tid)
        self.runtime(tid, ext, "cudaEventRecord", 135, self.jit(2_500))
        self.runtime(tid, ext, "cudaStreamWaitEvent", 147, self.jit(1_800))
        if ws > 1:  # ring all-reduce: 2(n-1)/n of the bytes at ~180 GB/s bus bandwidth
            kdur = 18_000 + int(2 * (ws - 1) / ws * nelems * 2 / 180.0)
        else:
            kdur = 6_000
        extra = (
            ', "Collective name": "allreduce", "In msg nelems": %d, "Out msg nelems": %d, '
            '"Group size": %d, "dtype": "BFloat16", "In split size": "[]", '
            '"Out split size": "[]", "Process Group Name": "0", '
            '"Process Group Description": "default_pg", "Process Group Ranks": "%s", '
            '"Seq": %d' % (nelems, nelems, ws, self.pg_ranks, seq)
        )
        ks, ke = self.launch(
            tid,
            ext,
            _K_NCCL_AR,
            _P_NCCL,
            kdur,
            stream=20,
            ready=ready,
            api="cudaLaunchKernelExC",
            cbid=430,
            kextra=extra,
        )
        self.gpu.append(_T_GPU_ANN % ("nccl:all_reduce", self.device, 20, self.us(ks - 1), self.us(ke - ks + 2), ext_a))
        self.t += self.jit(3_000)
        close_a()
        self.t += self.jit(2_000)
        self.ev[idx] = _T_X % (
            "cpu_op",
            "record_param_comms",
            self.pid,
            tid,
            self.us(ts),
            self.us(self.t - ts),
            '"External id": %d, "Record function id": 0, "Collective name": "allreduce", '
            '"dtype": "BFloat16", "In msg nelems": %d, "Out msg nelems": %d, "Group size": %d, '
            '"Process Group Name": "0", "Process Group Description": "default_pg", '
            '"Process Group Ranks": "%s", "Rank": %d, "Global rank start": 0, '
            '"Global rank stride": 1, "Seq": %d, "Ev Idx": %d'
            % (ext, nelems, nelems, ws, self.pg_ranks, self.rank, seq, evidx),
        )

    def trailer(self) -> list[str]:
        m = self.us(self.t_min)
        pid, dev = self.pid, self.device
        meta = [
            ("process_name", pid, 0, '"name": "python3"'),
            ("process_labels", pid, 0, '"labels": "CPU"'),
            ("process_name", dev, 0, '"name": "GPU %d"' % dev),
            ("process_labels", dev, 0, '"labels": "GPU %d"' % dev),
            ("thread_name", dev, 7, '"name": "stream 7"'),
            ("thread_name", dev, 20, '"name": "stream 20"'),
            ("thread_name", pid, self.tid, '"name": "thread %d (pt_main_thread)"' % self.tid),
            ("thread_name", pid, self.bwd_tid, '"name": "thread %d (pt_autograd_0)"' % self.bwd_tid),
        ]
        out = [
            '{"name": "%s", "ph": "M", "ts": %s, "pid": %d, "tid": %d, "args": {%s}}' % (name, m, p, t, a)
            for name, p, t, a in meta
        ]
        out.append(
            '{"ph": "X", "cat": "Trace", "ts": %s, "dur": %s, "pid": "Spans", '
            '"tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", '
            '"args": {"Op count": 0}}' % (m, self.us(self.t_max - self.t_min))
        )
        out.append(
            '{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": %s}' % self.us(self.t_max)
        )
        return out


def generate_rank_trace(
    path: Path | str,
    rank: int,
    world_size: int,
    steps: int = 3,
    layers: int = 4,
    seed: int = 0,
    target_bytes: int | None = None,
    gz: bool = False,
    *,
    base_time_ns: int | None = DEFAULT_BASE_TIME_NS,
    start_ns: int = DEFAULT_GEN_START_NS,
    distributed_info: str = "before",
    time_form: str = "relative",
) -> dict[str, Any]:
    """Writes one rank's realistic DDP training trace, streaming events to ``path``.

    Each step: ``ProfilerStep#N``, an HtoD input copy, ``layers`` Linear+ReLU forward layers,
    backward on the autograd thread with bucketed NCCL all-reduces on stream 20 overlapping
    backward GEMMs, fused AdamW and a DtoH ``loss.item()`` sync. Deterministic for
    (seed, rank). With ``target_bytes`` steps are added until the uncompressed size reaches
    it (``steps`` is then ignored). Returns ``{"path", "rank", "events", "bytes", "steps"}``.
    ``time_form`` (``TIME_FORMS``) other than ``relative`` sets the base time and the
    start itself.
    """
    if distributed_info not in ("before", "after", "none"):
        raise ValueError("distributed_info must be 'before', 'after' or 'none'")
    if time_form not in TIME_FORMS:
        raise ValueError(f"time_form must be one of {', '.join(TIME_FORMS)}")
    us = TIME_FORMS[time_form][2]
    if time_form != "relative":
        base_time_ns, start_ns = TIME_FORMS[time_form][:2]
    path = Path(path)
    layers = max(1, int(layers))
    sim = _RankSim(rank, world_size, layers, seed, start_ns)
    sim.us = us
    dist = None
    if distributed_info != "none":
        dist = kineto_distributed_info(rank, world_size, [pg_entry("0", "default_pg", list(range(world_size)))])
    props = kineto_device_properties(n_visible_devices(sim.device, world_size))
    n_events = 0
    n_steps = 0
    with open_text(path, gz) as f:
        head = kineto_header(props, dist, distributed_info, base_time_ns)
        f.write(head)
        written = len(head)
        sep = ""

        def emit(chunk: list[str]) -> None:
            nonlocal written, n_events, sep
            text = sep + ",\n".join(chunk)
            f.write(text)
            written += len(text)
            n_events += len(chunk)
            sep = ",\n"

        while True:
            if target_bytes is not None:
                if written >= target_bytes and n_steps > 0:
                    break
            elif n_steps >= steps:
                break
            emit(sim.step(n_steps))
            n_steps += 1
        emit(sim.trailer())
        tail = kineto_footer(dist, distributed_info, str(path))
        f.write(tail)
        written += len(tail)
    return {"path": path, "rank": rank, "events": n_events, "bytes": written, "steps": n_steps}


def _card_text(ranks: int, steps: int, layers: int, seed: int) -> str:
    # GPUs per node: up to 8 (an H100 node), and a divisor of the job's GPU count
    per_node = max(d for d in range(1, min(ranks, 8) + 1) if ranks % d == 0)
    return f"""version: 1
description: >
  Synthetic {layers}-layer MLP (hidden {_HIDDEN}) trained with DDP on {ranks} ranks, {steps}
  profiled steps per rank, bucketed NCCL all-reduce overlapping backward
  (generated by cclq.synth.kineto, seed {seed}).
hf_url:
trace_url:
contributor: cclq.synth.kineto
contact:
workload:
  model:
    phase: training
    moe: false
    granularity: model_fwd_bwd_pass
    model_family: synthetic-mlp
    precision: bf16
    epochs: 1
    iteration: {steps}
    model_arch:
      num_params: {layers * _LAYER_NELEMS}
      num_layers: {layers}
  data:
    batch_size: 8
    seq_len: 1024
    dataset: synthetic
  hardware:
    xpu_spec:
      type: GPU
      model: nvidia_h100
      total_count: {ranks}
      count_per_node: {per_node}
Model-executor:
  framework:
    name: pytorch
    compiler_tool_selection: plain_pytorch
  model_plan_parallelization:
    dp_replicate: {ranks}
    dp_shard: 1
    tp: 1
    pp: 1
    cp: 1
    ep: 1
  communication_library:
    name: NCCL
    version: 2.21.5
metric_source:
  traces: [json]
  metrics_specific_trace: []
"""


def _rank_job(kw: dict[str, Any]) -> dict[str, Any]:
    return generate_rank_trace(**kw)


def generate_workload(
    out_dir: Path | str,
    ranks: int = 4,
    steps: int = 3,
    layers: int = 4,
    seed: int = 0,
    target_bytes_per_rank: int | None = None,
    gz: bool = False,
    card: bool = True,
    *,
    jobs: int = 1,
    start_ns: int = DEFAULT_GEN_START_NS,
    time_form: str = "relative",
) -> list[Path]:
    """Writes ``kineto_trace_{r}.json[.gz]`` for each rank (and ``workload_card.yaml``).

    Returns the trace paths in rank order (not the card). ``jobs`` > 1 writes ranks in
    parallel processes. ``time_form``: see ``TIME_FORMS``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if gz else ".json"
    kws = [
        dict(
            path=out / f"kineto_trace_{r}{suffix}",
            rank=r,
            world_size=ranks,
            steps=steps,
            layers=layers,
            seed=seed,
            target_bytes=target_bytes_per_rank,
            gz=gz,
            start_ns=start_ns,
            time_form=time_form,
        )
        for r in range(ranks)
    ]
    if jobs > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, ranks, os.cpu_count() or 1)) as ex:
            results = list(ex.map(_rank_job, kws))
    else:
        results = [_rank_job(kw) for kw in kws]
    if card:
        n_steps = results[0]["steps"] if results else steps
        (out / "workload_card.yaml").write_text(_card_text(ranks, n_steps, layers, seed))
    return [Path(r["path"]) for r in results]
