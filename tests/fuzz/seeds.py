"""Seeds for tests/fuzz/run.sh: chunks of events as the reader's chunker cuts them, from a
trace that cclq.synth generates, prefixed with the harness's four parameter bytes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cclq.synth.kineto import KinetoTraceBuilder

out = Path(sys.argv[1])
b = KinetoTraceBuilder(rank=0, world_size=2)
b.cpu_op("aten::mm", ts=1_000, dur=5_000, args={"Input Dims": [[8, 8], [8, 8]]})
b.kernel("gemm", ts=2_000, dur=1_000)
b.memcpy(3_500, 500, nbytes=4096)
b.nccl_kernel("allreduce", ts=4_000, dur=2_000)
b.instant("marker", ts=4_500)
b.counter("mem", ts=4_600, values={"allocated": 10})
events = b.events() if hasattr(b, "events") else json.loads(b.write(out / "t.json").read_text())["traceEvents"]
(out / "t.json").unlink(missing_ok=True)
params = bytes([61, 255, 255, 7])
for i in range(len(events)):
    chunk = "[" + ", ".join(json.dumps(e) for e in events[i : i + 3]) + "]"
    (out / f"seed{i}").write_bytes(params + chunk.encode())
(out / "odd").write_bytes(
    params + b'[{"ph":"X","ts":1.0005e3,"dur":-0,"cat":"Kernel","pid":-0,"args":'
    b'{"stream":"0x0","grid":[1,2],"flops":"1.5e9","dtype":5}}, 42, {}, [1, [2]]]'
)
