"""``cclq serve`` against other sites, guessed tokens and slow clients, over real HTTP
(a server process per test on a free loopback port).

Without a token: a state-changing request from another site's page (its Origin, or
without one its Referer) is refused, and any request whose Host is not the server's
(DNS rebinding). With a token: the sign-in cookie has a Max-Age and is new at each
sign-in, the token is never taken from a URL, wrong tokens from one address are
throttled. Slow clients: headers and bodies that do not come are cut off, connections
are capped. Finished jobs' folders are removed after --keep-uploads-hours."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
import uuid

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")
pytest.importorskip("python_multipart", reason="the serve extra is not installed")

from helpers.serve import TOKEN, Server, two_rank_run, wait_for, zipped_folder  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


def request(
    server: Server,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    source: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (Host included when given)."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", server.port, timeout=30, source_address=(source, 0) if source else None
    )
    headers = dict(headers or {})
    conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    r = conn.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    conn.close()
    return out


def multipart(files: list[tuple[str, bytes]], group: str = "grp") -> tuple[str, bytes]:
    boundary = uuid.uuid4().hex
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="group_name"\r\n\r\n{group}\r\n'.encode()
    for name, data in files:
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    return f"multipart/form-data; boundary={boundary}", body + f"--{boundary}--\r\n".encode()


def jobs_of(server: Server) -> list[str]:
    uploads = server.root / "data" / "uploads"
    return sorted(p.name for p in uploads.iterdir() if p.is_dir()) if uploads.is_dir() else []


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """No token (the default mode), and a second name it is reached by."""
    root = tmp_path_factory.mktemp("open")
    s = Server(root, "--allow-host", "board.example", token=None)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def run_zip(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("run") / "sec_run"
    two_rank_run(folder)
    return zipped_folder(folder)


@pytest.mark.parametrize(
    "header",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Referer": "http://evil.example/page.html"},
        {"Origin": "http://127.0.0.1:1"},
    ],
)
def test_a_cross_site_upload_is_refused_without_a_token(open_server, run_zip, header):
    before = jobs_of(open_server)
    ctype, body = multipart([("run.zip", run_zip)], "cross")
    status, _, text = request(open_server, "POST", "/api/upload", {"Content-Type": ctype, **header}, body)
    assert status == 403 and "another site" in json.loads(text)["error"], text
    assert jobs_of(open_server) == before


def test_same_site_and_script_uploads_are_taken_without_a_token(open_server, run_zip):
    ctype, body = multipart([("run.zip", run_zip)], "own page")
    for header in ({"Origin": open_server.base}, {"Referer": open_server.base + "/"}, {}):
        status, _, text = request(open_server, "POST", "/api/upload", {"Content-Type": ctype, **header}, body)
        assert status == 200, text
    assert open_server.wait(json.loads(text)["upload_id"])["status"] == "done"


@pytest.mark.parametrize(
    "host,allowed",
    [
        ("evil.example", False),
        ("127.0.0.1.nip.io", False),
        ("127.0.0.1", True),
        ("localhost", True),
        ("board.example", True),
    ],
)
def test_the_host_must_name_this_server(open_server, host, allowed):
    """DNS rebinding: another name that resolves to 127.0.0.1 reads nothing, not the board
    nor the results API; the listen address, loopback names and --allow-host do."""
    for path in ("/", "/api/results/20990101T000000Z_deadbeef", "/health"):
        status, _, text = request(open_server, "GET", path, {"Host": f"{host}:{open_server.port}"})
        if allowed:
            assert status in (200, 404), (path, status)
        else:
            assert status == 421 and b"host name" in text, (path, status, text)


@pytest.fixture
def token_server(tmp_path):
    s = Server(tmp_path, "--header-timeout", "30")
    try:
        yield s
    finally:
        s.stop()


def _login(server: Server, token: str, source: str | None = None) -> tuple[int, dict[str, str], bytes]:
    form = urllib.parse.urlencode({"token": token}).encode()
    return request(
        server,
        "POST",
        "/_serve/login",
        {"Content-Type": "application/x-www-form-urlencoded", "Origin": server.base},
        form,
        source=source,
    )


def test_the_sign_in_cookie_expires_and_is_new_at_each_sign_in(token_server):
    cookies = []
    for _ in range(2):
        status, headers, _ = _login(token_server, TOKEN)
        assert status == 303
        cookie = headers["set-cookie"]
        attrs = {a.split("=")[0].strip().lower(): a.partition("=")[2] for a in cookie.split(";")}
        assert attrs["max-age"] == str(7 * 86400) and "httponly" in attrs and attrs["samesite"].lower() == "strict"
        cookies.append(cookie.split(";")[0])
        time.sleep(1.1)
    assert cookies[0] != cookies[1] and TOKEN not in cookies[0]
    ctype, body = multipart([("a.json", b"{}")])
    for c in cookies:  # both signed: each is taken on the server's own page
        status, _, text = request(
            token_server, "POST", "/api/upload", {"Content-Type": ctype, "Cookie": c, "Origin": token_server.base}, body
        )
        assert status == 200, text
    forged = cookies[0][:-4] + ("0000" if not cookies[0].endswith("0000") else "1111")
    status, _, _ = request(token_server, "POST", "/api/upload", {"Content-Type": ctype, "Cookie": forged}, body)
    assert status == 401


def test_the_token_is_never_taken_from_a_url(token_server):
    status, headers, text = request(token_server, "GET", f"/_serve/login?token={TOKEN}")
    assert status == 400 and "set-cookie" not in headers
    assert "not taken from a URL" in json.loads(text)["error"]


def test_wrong_tokens_are_throttled_per_address(token_server):
    for _ in range(5):
        assert _login(token_server, "guess")[0] == 401
    status, headers, _ = _login(token_server, TOKEN)  # the right one too, while this address waits
    assert status == 429 and int(headers["retry-after"]) > 0 and "set-cookie" not in headers
    ctype, body = multipart([("a.json", b"{}")])
    status, _, text = request(
        token_server, "POST", "/api/upload", {"Content-Type": ctype, "Authorization": "Bearer guess"}, body
    )
    assert status == 429 and "try again" in json.loads(text)["error"]
    assert _login(token_server, TOKEN, source="127.0.0.2")[0] == 303  # another address is not held up


# ------------------------------------------------------------------ slow clients


def test_a_connection_that_sends_no_headers_is_closed(tmp_path):
    server = Server(tmp_path, "--header-timeout", "1")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            start = time.monotonic()
            assert s.recv(1024) == b""  # closed by the server
            assert time.monotonic() - start < 10
    finally:
        server.stop()


def test_an_upload_body_that_stops_coming_is_refused(tmp_path):
    server = Server(tmp_path, "--body-timeout", "1")
    try:
        ctype, body = multipart([("a.json", b"{}" * 1000)])
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
            s.sendall(
                (
                    f"POST /api/upload HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: {ctype}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                + body[:500]
            )
            answer = b""
            while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                answer.lower().partition(b"content-length: ")[2].split(b"\r\n")[0] or 0
            ):
                piece = s.recv(4096)
                if not piece:
                    break
                answer += piece
        assert answer.startswith(b"HTTP/1.1 408") and b"sent nothing for 1 s" in answer, answer
        assert jobs_of(server) == []
    finally:
        server.stop()


def test_connections_are_capped(tmp_path):
    server = Server(tmp_path, "--max-connections", "4", "--header-timeout", "60")
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=20) for _ in range(4)]
    try:
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert s.recv(1024).startswith(b"HTTP/1.1 503")
        for s in idle:
            s.close()
        wait_for(lambda: server.get("/health") == (200, {"ok": True}), timeout=20, what="a free connection")
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_finished_jobs_are_removed_after_the_kept_time(tmp_path, run_zip):
    server = Server(tmp_path, "--keep-uploads-hours", "0.0005")  # 1.8 s
    try:
        status, body = server.upload([("run.zip", run_zip)], {"group_name": "kept"})
        assert status == 200, body
        assert server.wait(body["upload_id"])["status"] == "done"
        wait_for(lambda: body["upload_id"] not in jobs_of(server), timeout=60, what="the job folder to go")
        assert server.get(f"/api/results/{body['upload_id']}")[0] == 404
        assert f'data-trace="{body["workload"]}"' in server.get("/")[1]  # the workload stays on the board
    finally:
        server.stop()
