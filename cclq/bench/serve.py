"""``python -m cclq.bench.serve``: how ``cclq serve`` keeps up with uploads.

Starts a real server (its own process, a new warehouse and board in a temporary
folder, no token), uploads a small two-rank trace folder and waits for it (one
upload's time: upload to "done", board updated), twice; then sends ``--uploads`` more
one after another without waiting and measures until the last is done. Meanwhile a
thread asks for the board's pages (``/``, ``benchmark_data.json``, a workload page,
``/health``, a job's results) over and over and keeps the slowest answer. Prints one
JSON object (with the load average before and after).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path
from typing import Any

CARD = """workload:
  model: {phase: training}
  hardware:
    xpu_spec: {type: GPU, model: nvidia_h100, total_count: 2, count_per_node: 2}
metric_source:
  traces: [json]
"""
US = 1_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"


def small_trace_zip(folder: Path) -> bytes:
    """A two-rank trace folder (3 steps, 6 kernels a rank), zipped."""
    from cclq.synth.kineto import KinetoTraceBuilder

    folder.mkdir(parents=True)
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for i in range(3):
            b.profiler_step(i + 1, i * 1000 * US, 1000 * US)
        b.kernel(GEMM, 100 * US, 400 * US)
        b.kernel(GEMM, 1100 * US, 500 * US)
        b.nccl_kernel("allreduce", 1700 * US, 200 * US, nelems=1_000_000, dtype="Float")
        b.nccl_kernel("allgather", 1950 * US, 40 * US, nelems=1000, dtype="Float")
        b.kernel(GEMM, 2100 * US, 300 * US)
        b.write(folder / f"kineto_trace_{rank}.json")
    (folder / "workload_card.yaml").write_text(CARD)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            zf.write(p, f"run/{p.name}")
    return buf.getvalue()


class Client:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, timeout: float = 60) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def upload(self, data: bytes, group: str) -> str:
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="group_name"\r\n\r\n{group}\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="run.zip"\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        req = urllib.request.Request(
            self.base + "/api/upload",
            data=body,
            method="POST",
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            return str(json.loads(r.read())["upload_id"])

    def wait(self, ids: list[str], timeout: float = 1800) -> dict[str, str]:
        left, out = set(ids), {}
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for i in sorted(left):
                status = json.loads(self.get(f"/api/results/{i}")[1]).get("status")
                if status in ("done", "error"):
                    out[i] = status
                    left.discard(i)
            time.sleep(0.1)
        if left:
            raise RuntimeError(f"{len(left)} job(s) not done after {timeout} s")
        return out


class Poller(threading.Thread):
    """Asks for the board's pages one after another; keeps every answer's time."""

    def __init__(self, client: Client) -> None:
        super().__init__(daemon=True)
        self.client, self.times, self.errors = client, [], []  # type: ignore[var-annotated]
        self.stop = threading.Event()
        self.paths = ["/", "/benchmark_data.json", "/health"]

    def run(self) -> None:
        while not self.stop.is_set():
            for path in list(self.paths):
                start = time.perf_counter()
                try:
                    status, _ = self.client.get(path, timeout=30)
                except OSError as e:  # the server stopping at the end, or a refused connection
                    status = 599
                    if self.stop.is_set():
                        return
                    self.errors.append(f"{path}: {e}")
                self.times.append((time.perf_counter() - start, path))
                if status >= 500:
                    self.errors.append(f"{path}: {status}")
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=20)
    parser.add_argument("--singles", type=int, default=2, help="uploads waited for one at a time first")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="cclq-bench-serve-"))
    data = small_trace_zip(root / "trace")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(root / "server.log", "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cclq.cli.app import main; main()",
            "serve",
            "--port",
            str(port),
            "--data",
            str(root / "data"),
            "-w",
            str(root / "wh"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "CCLQ_SERVE_TOKEN": ""},
    )
    client = Client(port)
    result: dict[str, Any] = {"load_before": os.getloadavg()}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/health")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
        poller = Poller(client)
        poller.start()
        singles = []
        for i in range(args.singles):
            start = time.perf_counter()
            upload_id = client.upload(data, f"single {i}")
            status = client.wait([upload_id])[upload_id]
            singles.append(time.perf_counter() - start)
            if status != "done":
                raise RuntimeError(f"upload {upload_id}: {status}")
            if i == 0:  # a workload page too
                pages = re.findall(r'href="(w/[^"]+\.html)"', client.get("/")[1].decode())
                poller.paths += [f"/{pages[0]}"] if pages else []
        start = time.perf_counter()
        ids = [client.upload(data, f"burst {i}") for i in range(args.uploads)]
        sent = time.perf_counter() - start
        statuses = client.wait(ids)
        burst = time.perf_counter() - start
        poller.stop.set()
        poller.join()
        slowest = max(poller.times)
        rows = json.loads(client.get("/benchmark_data.json")[1]).get("rows", [])
        result.update(
            {
                "one_upload_s": [round(t, 2) for t in singles],
                "uploads": args.uploads,
                "burst_sent_s": round(sent, 2),
                "burst_done_s": round(burst, 2),
                "burst_over_one": round(burst / min(singles), 2),
                "all_done": all(v == "done" for v in statuses.values()),
                "board_rows": len(rows),
                "page_requests": len(poller.times),
                "slowest_page_s": round(slowest[0], 3),
                "slowest_page": slowest[1],
                "page_errors": poller.errors[:5],
                "load_after": os.getloadavg(),
            }
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
