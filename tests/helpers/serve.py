"""A ``cclq serve`` started as its own process on a free loopback port, and the HTTP
calls its tests make (standard library only: urllib, http.client)."""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TOKEN = "s3cret-token"
CARD = """workload:
  model: {phase: training}
  hardware:
    xpu_spec: {type: GPU, model: nvidia_h100, total_count: 2, count_per_node: 2}
metric_source:
  traces: [json]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(
        self, root: Path, *extra: str, token: str | None = TOKEN, limits: bool = True, env: dict[str, str] | None = None
    ) -> None:
        self.root = root
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "server.log", "a")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CCLQ_DAEMON": "0", **(env or {})}
        env.pop("CCLQ_SERVE_TOKEN", None)
        if token:
            env["CCLQ_SERVE_TOKEN"] = token
        bounds = ["--max-upload-mb", "2", "--max-unpacked-mb", "64", "--max-files", "50"] if limits else []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from cclq.cli.app import main; main()",
                "serve",
                "--port",
                str(self.port),
                "--data",
                str(root / "data"),
                "-w",
                str(root / "wh"),
                *bounds,
                *extra,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=root,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.get("/health")[1] == {"ok": True}:
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError("the server did not start: " + (root / "server.log").read_text())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()

    def get(self, path: str) -> tuple[int, dict | str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as r:
                body = r.read().decode()
                status = r.status
                ctype = r.headers.get("content-type", "")
        except urllib.error.HTTPError as e:
            body, status, ctype = e.read().decode(), e.code, e.headers.get("content-type", "")
        return status, json.loads(body) if "json" in ctype else body

    def upload(
        self,
        files: list[tuple[str, bytes]],
        fields: dict[str, str] | None = None,
        token: str | None = TOKEN,
        raw: bytes | None = None,
        ctype: str | None = None,
    ) -> tuple[int, dict]:
        boundary = uuid.uuid4().hex
        parts = []
        for k, v in (fields if fields is not None else {"group_name": "grp"}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        for name, data in files:
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n".encode()
                + data
                + b"\r\n"
            )
        body = raw if raw is not None else b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers = {"Content-Type": ctype or f"multipart/form-data; boundary={boundary}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.base + "/api/upload", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def upload_streaming(self, name: str, data: bytes, chunked: bool) -> tuple[int, dict]:
        """A body sent in pieces, as a browser or curl sends a large file; the server may
        answer and close before the client has sent it all (a broken pipe for the
        client is then expected), so the answer is read whatever the send did."""
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="group_name"\r\n\r\nbig\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.putrequest("POST", "/api/upload")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(len(body)))
        conn.endheaders()
        try:
            for i in range(0, len(body), 1 << 16):
                piece = body[i : i + (1 << 16)]
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        out = r.status, json.loads(r.read())
        conn.close()
        return out

    def wait(self, upload_id: str, timeout: float = 240) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = self.get(f"/api/results/{upload_id}")
            assert status == 200, body
            if body["status"] in ("done", "error"):
                return body
            time.sleep(0.5)
        raise AssertionError(f"job {upload_id} did not finish")


def zipped_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            zf.write(p, f"{folder.name}/{p.relative_to(folder)}")
    return buf.getvalue()


def big_trace_zip(tmp: Path, kernels: int = 150_000) -> bytes:
    """A zip of a one-rank Kineto trace folder with ``kernels`` kernels (~60 MB of JSON,
    ~1 MB zipped): its ingest takes seconds, long enough to stop it midway. The events
    are copies of the one kernel cclq's trace builder writes, moved along in time."""
    from cclq.synth.kineto import KinetoTraceBuilder

    b = KinetoTraceBuilder(rank=0, world_size=1)
    b.profiler_step(1, 0, kernels * 4_000)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", 1_000, 2_000)
    b.write(tmp / "one.json")
    doc = json.loads((tmp / "one.json").read_text())
    (kernel,) = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    events = [
        json.dumps({**kernel, "ts": 1.0 + 4.0 * k, "args": {**kernel["args"], "correlation": k + 1}})
        for k in range(kernels)
    ]
    others = ",".join(json.dumps(e) for e in doc["traceEvents"] if e is not kernel)
    head = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[:-1]
    text = head + ', "traceEvents": [' + others + "," + ",".join(events) + "]}"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big_run/kineto_trace_0.json", text)
        zf.writestr("big_run/workload_card.yaml", CARD)
    return buf.getvalue()


def job_state(server: Server, upload_id: str) -> dict:
    """The job.json the job's process writes (what the server answers from)."""
    try:
        return json.loads((server.root / "data" / "uploads" / upload_id / "job.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_for(predicate, timeout: float = 120, what: str = "a condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


US = 1_000  # ns per microsecond
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"


def two_rank_run(folder: Path, card: str | None = CARD) -> Path:
    """tests/query/test_ccl_bench_names.py's two-rank layout (its avg_step_time, worked out
    by hand: three ProfilerSteps of 1000 us, so 0.001 s): each rank's steps, three GEMMs
    and three NCCL kernels."""
    from cclq.synth.kineto import KinetoTraceBuilder

    folder.mkdir(parents=True)
    for rank in range(2):
        b = KinetoTraceBuilder(rank=rank, world_size=2)
        for i in range(3):
            b.profiler_step(i + 1, i * 1000 * US, 1000 * US)
        b.kernel(GEMM, 100 * US, 400 * US)
        b.kernel(GEMM, 1100 * US, 500 * US)
        b.nccl_kernel("allreduce", 1700 * US, (200, 300)[rank] * US, nelems=1_000_000, dtype="Float")
        b.nccl_kernel("allgather", 1950 * US, 40 * US, nelems=1000, dtype="Float")
        b.kernel(GEMM, 2100 * US, 300 * US)
        b.nccl_kernel("allreduce", 2500 * US, 100 * US, nelems=1_000_000, dtype="Float")
        b.write(folder / f"kineto_trace_{rank}.json")
    if card is not None:
        (folder / "workload_card.yaml").write_text(card)
    return folder


def run_cclq(*args: str) -> subprocess.CompletedProcess:
    """The real ``cclq`` entry point in its own process."""
    return subprocess.run(
        [sys.executable, "-c", "from cclq.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
