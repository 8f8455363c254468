"""``cclq serve`` started as its own process on a free loopback port, and a client for it
(urllib / http.client): the serve tests and the browser's upload test drive it."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from helpers.paths import REPO as ROOT

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
    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "server.log", "w")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CCLQ_DAEMON": "0", "CCLQ_SERVE_TOKEN": TOKEN}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from cclq.cli.app import main; main()", "serve", "--port", str(self.port),
             "--data", str(root / "data"), "-w", str(root / "wh"), "--max-upload-mb", "2",
             "--max-unpacked-mb", "64", "--max-files", "50", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=root)
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

    def upload(self, files: list[tuple[str, bytes]], fields: dict[str, str] | None = None,
               token: str | None = TOKEN, raw: bytes | None = None, ctype: str | None = None) -> tuple[int, dict]:
        boundary = uuid.uuid4().hex
        parts = []
        for k, v in (fields if fields is not None else {"group_name": "grp"}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        for name, data in files:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                         f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
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
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="group_name"\r\n\r\nbig\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n\r\n'
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.putrequest("POST", "/api/upload")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.putheader("Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else str(len(body)))
        conn.endheaders()
        try:
            for i in range(0, len(body), 1 << 16):
                piece = body[i:i + (1 << 16)]
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
