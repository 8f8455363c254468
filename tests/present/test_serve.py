"""``cclq serve`` over real HTTP: the test starts the real command on a free local port
and talks to it with the standard library's HTTP client (urllib / http.client).

Checked: /health; an upload (a zip of a hand-built two-rank trace folder) queued, run,
and answered in CCL-Bench's results.json shape with the numbers worked out by hand;
its row on the board; the token; the JSON errors of malformed requests; hostile
archives (traversal, absolute name, symlink, hard link, compression bomb, oversize
body, too many files) refused with a JSON error, with nothing left in the server's
folders nor anywhere else under the test's root. Skipped without the serve extra.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")
pytest.importorskip("python_multipart", reason="the serve extra is not installed")

from helpers.archives import link, make_tar, make_zip  # noqa: E402
from helpers.ccl_bench import build_gpu  # noqa: E402
from helpers.serve import CARD, TOKEN, Server, zipped_folder  # noqa: E402

pytestmark = pytest.mark.slow  # (CONTRIBUTING.md: over ~2 s each)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    s = Server(root)
    try:
        yield s
    finally:
        s.stop()


def everything(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.name != "server.log"}


def test_health(server):
    assert server.get("/health") == (200, {"ok": True})


def test_an_upload_runs_and_lands_on_the_board(server, tmp_path):
    build_gpu(tmp_path / "my_run", card=CARD)
    status, body = server.upload([("my_run.zip", zipped_folder(tmp_path / "my_run"))], {"group_name": "team a"})
    assert status == 200, body
    assert body["status"] == "ok" and body["group_name"] == "team a"
    assert body["uploaded"][0]["filename"] == "my_run.zip" and body["files"] == 3
    assert body["card"] == "workload_card.yaml" and isinstance(body["card_problems"], list)
    assert body["workload"].startswith("team_a_")
    done = server.wait(body["upload_id"])
    assert done["status"] == "done", done
    results = done["results"]
    assert set(results) >= {"metrics", "metric_info"}  # CCL-Bench's results.json keys
    assert set(results["metrics"]) == set(results["metric_info"])
    # by hand (tests/query/test_ccl_bench_names.py's layout): the inner step lasts 1000 us;
    # comm (200 + 40 + 100) and (300 + 40 + 100) us of 1540 and 1640 us of kernels
    assert results["metrics"]["avg_step_time"] == 0.001
    assert results["metrics"]["straggler"] == pytest.approx((440 - 340) / 440, rel=1e-5)
    assert results["metrics"]["communication_fraction"] == pytest.approx((340 / 1540 + 440 / 1640) / 2, rel=1e-5)
    assert results["metrics"]["mfu"] is None and results["reasons"]["mfu"]
    status, page = server.get("/")
    assert status == 200 and f'data-trace="{body["workload"]}"' in page and 'id="upload-form"' in page
    assert server.get("/benchmark_data.json")[0] == 200
    # results survive a restart: read from the job folder
    folder = server.root / "data" / "uploads" / body["upload_id"]
    assert json.loads((folder / "results.json").read_text())["metrics"] == results["metrics"]


def test_a_failed_job_says_why_and_loses_nothing(server, tmp_path):
    """Two workload folders in one upload: the job fails with the reason; the board and
    the warehouse are as they were."""
    build_gpu(tmp_path / "two" / "run_a", card=CARD)
    build_gpu(tmp_path / "two" / "run_b", card=CARD)
    rows = re.findall(r'data-trace="([^"]+)"', server.get("/")[1])
    status, body = server.upload([("two.zip", zipped_folder(tmp_path / "two"))], {"group_name": "two"})
    assert status == 200, body
    done = server.wait(body["upload_id"])
    assert done["status"] == "error" and "2 workload folders" in done["error"], done
    assert re.findall(r'data-trace="([^"]+)"', server.get("/")[1]) == rows


def test_too_many_file_parts(server):
    status, body = server.upload([(f"f{i}.json", b"{}") for i in range(51)])
    assert status == 413 and "more than 50 files" in body["error"]


def test_the_token(server):
    status, body = server.upload([("a.json", b"{}")], token=None)
    assert status == 401 and "token" in body["error"]
    status, body = server.upload([("a.json", b"{}")], token="wrong")
    assert status == 401


def test_malformed_requests_get_json_errors(server):
    assert server.upload([], {"group_name": "x"})[0] == 400
    status, body = server.upload([("a.json", b"{}")], {})
    assert (status, body["error"]) == (400, "Missing group_name")
    status, body = server.upload([], raw=b"hello", ctype="text/plain")
    assert status == 415 and "multipart" in body["error"]
    not_found = {"error": "Upload ID not found", "message": "Upload ID not found"}
    assert server.get("/api/results/20990101T000000Z_deadbeef") == (404, not_found)
    assert server.get("/api/results/..%2F..%2Fetc") == (404, not_found)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/../../../etc/passwd")
    r = conn.getresponse()
    assert r.status == 404 and b"root:" not in r.read()
    conn.close()
    status, body = server.upload([("c.zip", zipped_folder_with_card(b"[unclosed: yaml"))], {"group_name": "x"})
    assert status == 422 and body["card_problems"], body


def zipped_folder_with_card(card: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("run/kineto_trace_0.json", "{}")
        zf.writestr("run/workload_card.yaml", card)
    return buf.getvalue()


def _hostile(tmp: Path) -> dict[str, tuple[str, bytes, str]]:
    return {
        "traversal": (
            "t.zip",
            make_zip(tmp / "t.zip", [("ok.json", b"{}"), ("../../../escaped.txt", b"x")]).read_bytes(),
            "leaves the upload folder",
        ),
        "absolute": (
            "a.zip",
            make_zip(tmp / "a.zip", [(str(tmp / "abs-escape.txt"), b"x")]).read_bytes(),
            "absolute path",
        ),
        "symlink": ("s.tar.gz", make_tar(tmp / "s.tgz", [link("passwd", "/etc/passwd")]).read_bytes(), "symbolic link"),
        "hardlink": (
            "h.tar.gz",
            make_tar(tmp / "h.tgz", [link("h", "../../../escaped.txt", hard=True)]).read_bytes(),
            "hard link",
        ),
        "bomb": ("b.json.bin.gz", gzip.compress(bytes(48 << 20)), "inflates"),
        "too many files": (
            "m.zip",
            make_zip(tmp / "m.zip", [(f"f{i}.json", b"{}") for i in range(60)]).read_bytes(),
            "more than 50",
        ),
        "oversize": ("big.bin", os.urandom(3 << 20), "over 2097152 bytes"),
        "oversize, chunked": ("big.bin", os.urandom(3 << 20), "over 2097152 bytes"),
    }


@pytest.mark.parametrize(
    "case", ["traversal", "absolute", "symlink", "hardlink", "bomb", "too many files", "oversize", "oversize, chunked"]
)
def test_hostile_uploads_are_refused_and_leave_nothing(case, server, tmp_path):
    name, data, words = _hostile(tmp_path)[case]
    before = everything(server.root)
    if case.startswith("oversize"):
        status, body = server.upload_streaming(name, data, chunked=case.endswith("chunked"))
    else:
        status, body = server.upload([(name, data)], {"group_name": "evil"})
    assert status in (413, 422), body
    assert words in body["error"], body
    assert everything(server.root) == before  # no job folder, no file anywhere under the server's root
    assert not (tmp_path / "abs-escape.txt").exists() and not (server.root / "escaped.txt").exists()
    assert not (server.root / "data" / "escaped.txt").exists()


def test_serving_a_ccl_bench_site_as_it_is(tmp_path):
    """--site: the folder's own index.html and files, unchanged by a job; the upload API
    answers as CCL-Bench's page expects (200, status ok, then metrics and metric_info)."""
    site = tmp_path / "ccl-bench"
    (site / "website").mkdir(parents=True)
    page = "<!doctype html><html><body><h1>CCL-Bench</h1><form id='their-form'></form></body></html>"
    (site / "index.html").write_text(page)
    (site / "website" / "data.js").write_text("const BENCHMARK_DATA = {};\n")
    (tmp_path / "root").mkdir()
    server = Server(tmp_path / "root", "--site", str(site))
    try:
        assert server.get("/") == (200, page)
        assert server.get("/website/data.js")[1] == "const BENCHMARK_DATA = {};\n"
        build_gpu(tmp_path / "run", card=CARD)
        card = json.dumps({"workload": {"model": {"phase": "training"}}, "metric_source": {"traces": ["json"]}})
        status, body = server.upload(
            [("run.zip", zipped_folder(tmp_path / "run"))], {"group_name": "site run", "workload_card": card}
        )
        assert (status, body["status"]) == (200, "ok")
        assert body["workload_card_generated"] is False  # the upload has its own card
        done = server.wait(body["upload_id"])
        assert done["status"] == "done" and done["results"]["metrics"]["avg_step_time"] == 0.001
        assert (site / "index.html").read_text() == page and sorted(p.name for p in site.rglob("*")) == [
            "data.js",
            "index.html",
            "website",
        ]
        assert not (tmp_path / "root" / "data" / "board").exists()
        # no card in the upload: the form's card is written (nulls dropped) and checked
        (tmp_path / "run" / "workload_card.yaml").unlink()
        form_card = json.dumps(
            {"workload": {"model": {"phase": "training", "moe": None}}, "metric_source": {"traces": ["json"]}}
        )
        status, body = server.upload(
            [("run.zip", zipped_folder(tmp_path / "run"))], {"group_name": "no card", "workload_card": form_card}
        )
        assert (status, body["workload_card_generated"], body["card"]) == (200, True, "workload_card.yaml")
        assert body["card_problems"]  # the template's required fields are missing: reported, not refused
        written = (
            tmp_path
            / "root"
            / "data"
            / "uploads"
            / body["upload_id"]
            / "trace"
            / body["workload"]
            / "workload_card.yaml"
        ).read_text()
        assert "moe" not in written and "json" in written
    finally:
        server.stop()


def test_ccl_bench_page_uploads_after_signing_in_once(tmp_path):
    """With a token, CCL-Bench's own page (its form posts /api/upload from the same origin
    without an Authorization header) works after the browser signs in once at
    /_serve/login: an HttpOnly, SameSite=Strict cookie holding a digest of the token. The
    cookie is refused on a request another site's page sends, and a wrong token sets none."""
    import http.cookiejar

    site = tmp_path / "ccl-bench"
    site.mkdir()
    (site / "index.html").write_text("<html><body>CCL-Bench</body></html>")
    (tmp_path / "root").mkdir()
    server = Server(tmp_path / "root", "--site", str(site))
    try:
        build_gpu(tmp_path / "run", card=CARD)
        payload = [("run.zip", zipped_folder(tmp_path / "run"))]
        assert server.upload(payload, token=None)[0] == 401  # the page's form, not signed in
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        with pytest.raises(urllib.error.HTTPError) as refused:  # a wrong token
            browser.open(
                urllib.request.Request(
                    f"{server.base}/_serve/login", data=urllib.parse.urlencode({"token": "wrong"}).encode()
                ),
                timeout=30,
            )
        assert refused.value.code == 401 and not list(jar)
        with browser.open(f"{server.base}/_serve/login", timeout=30) as r:  # the sign-in form
            assert 'name="token"' in r.read().decode()
        form = urllib.parse.urlencode({"token": TOKEN}).encode()
        with browser.open(urllib.request.Request(f"{server.base}/_serve/login", data=form), timeout=30) as r:
            assert r.status == 200 and r.geturl() == f"{server.base}/"  # redirected to the site
        (cookie,) = list(jar)
        assert cookie.name == "cclq_upload" and TOKEN not in cookie.value
        assert cookie.has_nonstandard_attr("HttpOnly")
        assert cookie.get_nonstandard_attr("SameSite", "").lower() == "strict"

        def page_upload(origin: str | None) -> tuple[int, dict]:
            boundary = uuid.uuid4().hex
            body = (
                f'--{boundary}\r\nContent-Disposition: form-data; name="group_name"\r\n\r\ngrp\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="run.zip"\r\n'
                "Content-Type: application/zip\r\n\r\n"
            ).encode()
            body += payload[0][1] + f"\r\n--{boundary}--\r\n".encode()
            headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
            if origin:
                headers["Origin"] = origin
            req = urllib.request.Request(f"{server.base}/api/upload", data=body, headers=headers, method="POST")
            try:
                with browser.open(req, timeout=60) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        status, body = page_upload(server.base)  # the page's XHR: same origin, the cookie, no header
        assert (status, body["status"]) == (200, "ok")
        assert server.wait(body["upload_id"])["status"] == "done"
        assert page_upload("https://elsewhere.example")[0] == 403  # another site's page
    finally:
        server.stop()
