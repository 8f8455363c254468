"""``cclq serve``: the board, plus an upload API compatible with CCL-Bench's
``website/upload_server.py`` (the routes its page calls):

    GET  /health                 {"ok": true}
    POST /api/upload             multipart/form-data: files (one or more: a zip, tar,
                                 tar.gz, .gz or plain trace files), group_name, and
                                 optionally workload_card (the card as JSON)
    GET  /api/results/<id>       {"status": queued | processing | done | error,
                                  "results": {"metrics", "metric_info", "reasons"}, ...}
    GET  /                       the board (cclq board's site), with an upload form; or,
                                 with ``--site DIR``, DIR's own index.html and files as they
                                 are (CCL-Bench's checkout: its page's upload form calls the
                                 routes above on the same origin)

Built on Starlette (the ASGI toolkit under FastAPI) served by uvicorn; both are in the
``serve`` extra and imported only here. Why not Flask, which CCL-Bench uses: an ASGI
handler reads the request body as a stream, so an upload goes to disk chunk by chunk
and is cut off at the size cap (Flask/Werkzeug parse the whole form before the
handler sees it, spooling it to a temporary folder outside the job's), and
python-multipart's push parser lets each file part be written straight into the job
folder. Nothing of an upload is written outside its job folder until the job's
ingest commits to the warehouse.

Safety: the server binds to 127.0.0.1 unless told otherwise; with a token (``--token``
or ``CCLQ_SERVE_TOKEN``) an upload needs ``Authorization: Bearer <token>``, or, from a
browser on this server's own pages, the HttpOnly SameSite=Strict cookie that signing in
once at ``/_serve/login`` sets (CCL-Bench's page posts its form without a header); archives
are unpacked by ``cclq.present.serve.archive`` (no traversal, no links, bounded size,
count and inflation); upload ids are checked against their pattern before they touch
a path; errors are JSON ``{"error": "...", "message": "..."}`` (CCL-Bench's page shows
``message``) with a 4xx/5xx status.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from cclq.present.serve.archive import ArchiveRefused, Limits, safe_filename, unpack_upload
from cclq.present.serve.jobs import Job, JobQueue, JobSettings, read_json, write_json
from cclq.store.warehouse import Warehouse

UPLOAD_ID = re.compile(r"^\d{8}T\d{6}Z_[0-9a-f]{8}$")
MAX_FIELD_BYTES = 1 << 20  # group_name, workload_card: small text fields
FILE_FIELDS = ("files", "file")
TOKEN_ENV = "CCLQ_SERVE_TOKEN"


@dataclass(frozen=True)
class ServeSettings:
    data_dir: Path  # uploads/<id>/ live here
    warehouse: Warehouse
    board_dir: Path
    config_path: Path | None = None
    site_dir: Path | None = None  # serve this static site as it is (CCL-Bench's checkout) instead of the board
    token: str | None = None
    limits: Limits = Limits()
    workers: int = 1
    queue_size: int = 64
    job_timeout: float = 3600.0  # seconds a job's process may run one job (--job-timeout)
    job_memory_mb: int | None = None  # address space of a job's process (--job-memory-mb)
    listen_host: str = "127.0.0.1"  # --host: what a request's Host may name (besides allow_hosts)
    allow_hosts: tuple[str, ...] = ()  # --allow-host: more names this server is reached by
    header_timeout: float = 10.0  # seconds a connection has to send a request's headers
    body_timeout: float = 60.0  # seconds an upload's body may go without sending a byte
    max_connections: int = 128  # open connections at once; more are answered 503 and closed
    keep_uploads_hours: float = 168.0  # a finished job's folder (its upload, results) is removed after


class UploadRefused(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


class _FormSink:
    """python-multipart callbacks: file parts go straight to ``incoming/``, text fields
    to small bounded buffers."""

    def __init__(self, incoming: Path, max_files: int) -> None:
        self.incoming = incoming
        self.max_files = max_files
        self.files: list[tuple[Path, str]] = []  # (stored path, safe original name)
        self.uploaded: list[dict[str, Any]] = []
        self.rejected: list[dict[str, str]] = []
        self.fields: dict[str, bytes] = {}
        self._headers: dict[bytes, bytes] = {}
        self._field_name = b""
        self._header_name = b""
        self._header_value = b""
        self._out: BinaryIO | None = None
        self._out_name = ""
        self._buf: bytearray | None = None
        self._size = 0

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._hfield,
            "on_header_value": self._hvalue,
            "on_header_end": self._hend,
            "on_headers_finished": self._headers_done,
            "on_part_data": self._data,
            "on_part_end": self._end,
        }

    def _begin(self) -> None:
        self._headers, self._out, self._buf, self._size = {}, None, None, 0

    def _hfield(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _hvalue(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _hend(self) -> None:
        self._headers[self._header_name.lower()] = self._header_value
        self._header_name = self._header_value = b""

    def _headers_done(self) -> None:
        from python_multipart.multipart import parse_options_header

        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        self._field_name = name.encode()
        if filename is None:
            self._buf = bytearray()
            return
        original = filename.decode("utf-8", "replace")
        if name not in FILE_FIELDS:
            self.rejected.append({"original": original, "reason": f"file in field {name!r} (want `files`)"})
            return
        if len(self.files) >= self.max_files:
            raise UploadRefused(413, f"more than {self.max_files} files in the upload")
        safe = safe_filename(original)
        if safe is None or any(n == safe for _, n in self.files):
            self.rejected.append({"original": original, "reason": "invalid or repeated filename"})
            return
        path = self.incoming / f"{len(self.files):04d}-{safe}"
        self._out, self._out_name = open(path, "xb"), safe
        self.files.append((path, safe))

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._out is not None:
            self._out.write(data[start:end])
            self._size += end - start
        elif self._buf is not None:
            self._buf += data[start:end]
            if len(self._buf) > MAX_FIELD_BYTES:
                raise UploadRefused(413, f"form field {self._field_name.decode()!r} is over {MAX_FIELD_BYTES} bytes")

    def _end(self) -> None:
        if self._out is not None:
            self._out.close()
            self.uploaded.append({"filename": self._out_name, "size_bytes": self._size})
        elif self._buf is not None:
            self.fields[self._field_name.decode()] = bytes(self._buf)
        self._out, self._buf = None, None

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


def new_upload_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}_{uuid.uuid4().hex[:8]}"


def _card_from_form(text: str, workload: Path) -> bool:
    """Writes the form's card (JSON) as the workload's card unless the upload has one;
    returns whether it wrote it. Null values are dropped, as CCL-Bench does."""
    import yaml

    from cclq.cards.load import find_card

    if not text.strip() or find_card(workload) is not None:
        return False
    try:
        card = json.loads(text)
    except ValueError as e:
        raise UploadRefused(400, f"workload_card is not JSON: {e}") from None
    if not isinstance(card, dict):
        raise UploadRefused(400, "workload_card must be a JSON object")

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if v is not None}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    (workload / "workload_card.yaml").write_text(yaml.safe_dump(strip(card), sort_keys=False), encoding="utf-8")
    return True


def _check_card(workload: Path) -> tuple[str | None, list[dict[str, str]]]:
    """(card file name, problems as `cclq cards check` finds them); a card that cannot
    be read at all refuses the upload."""
    from cclq.cards.check import check_card_file
    from cclq.cards.load import find_card

    card = find_card(workload)
    if card is None:
        return None, []
    problems = [{"field": p.field, "problem": p.problem} for p in check_card_file(card)]
    if any(p["field"] == "-" for p in problems):
        raise UploadRefused(422, f"the workload card {card.name} cannot be read", card_problems=problems)
    return card.name, problems


def prepare_upload(settings: ServeSettings, upload_id: str, sink: _FormSink) -> dict[str, Any]:
    """After the body is on disk: unpack, card, queue entry. Runs in a worker thread."""
    folder = settings.data_dir / "uploads" / upload_id
    group = sink.fields.get("group_name", b"").decode("utf-8", "replace").strip()
    if not sink.files:
        raise UploadRefused(400, "No files provided", rejected=sink.rejected)
    if not group:
        raise UploadRefused(400, "Missing group_name")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", group).strip("._-")[:64] or "upload"
    workload = folder / "trace" / f"{slug}_{upload_id[-8:]}"
    try:
        written = unpack_upload(sink.files, workload, settings.limits)
    except ArchiveRefused as e:
        raise UploadRefused(422, e.message) from None
    shutil.rmtree(folder / "incoming", ignore_errors=True)
    if not written:
        raise UploadRefused(400, "the upload holds no files")
    generated = _card_from_form(sink.fields.get("workload_card", b"").decode("utf-8", "replace"), workload)
    card_name, problems = _check_card(workload)
    return {
        "status": "ok",
        "upload_id": upload_id,
        "group_name": group,
        "uploaded": sink.uploaded,
        "rejected": sink.rejected,
        "workload_card_generated": generated,
        "workload": workload.name,
        "files": len(written),
        "card": card_name,
        "card_problems": problems,
        "results_url": f"/api/results/{upload_id}",
    }


COOKIE = "cclq_upload"
LOGIN_PATH = "/_serve/login"


COOKIE_MAX_AGE = 7 * 86400  # a browser's sign-in lasts a week (the cookie's Max-Age and the server's check)
LOGIN_FAILURES = 5  # wrong tokens from one address ...
LOGIN_WINDOW = 60.0  # ... within this many seconds: every try from it is refused until the window passes
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def _sign(token: str, text: str) -> str:
    return hmac.new(token.encode(), b"cclq serve sign-in: " + text.encode(), hashlib.sha256).hexdigest()


def _cookie_value(token: str, issued: int | None = None) -> str:
    """A new sign-in cookie: when it was issued, a nonce, and their signature with the
    token (never the token itself); each sign-in gets a new one."""
    body = f"{int(time.time()) if issued is None else issued}.{secrets.token_hex(8)}"
    return f"{body}.{_sign(token, body)}"


def _cookie_valid(token: str, cookie: str) -> bool:
    """Signed with this token and younger than COOKIE_MAX_AGE (the server checks the
    age itself: a cookie kept past its Max-Age is refused)."""
    issued, _, rest = cookie.partition(".")
    nonce, _, sig = rest.partition(".")
    if not issued.isdigit() or not nonce or not sig:
        return False
    if not hmac.compare_digest(sig.encode(), _sign(token, f"{issued}.{nonce}").encode()):
        return False
    return -60 <= time.time() - int(issued) <= COOKIE_MAX_AGE


def _same_origin(origin: str | None, host: str | None) -> bool:
    """A request a browser sent from a page of this server, or one that sends no Origin
    (not a browser's cross-site request)."""
    if not origin:
        return True
    return bool(host) and urlsplit(origin).netloc.lower() == str(host).lower()


def _authorized(
    settings: ServeSettings,
    header: str | None,
    cookie: str | None = None,
    origin: str | None = None,
    host: str | None = None,
) -> bool:
    """With a token: ``Authorization: Bearer <token>`` (scripts, cclq's own form), or the
    sign-in cookie a browser got from ``LOGIN_PATH`` (CCL-Bench's page, whose form sends
    no header), on a request from this server's own pages. The cookie is HttpOnly and
    SameSite=Strict: no other site's page can make the browser send it."""
    if not settings.token:
        return True
    given = (header or "").removeprefix("Bearer ").strip()
    if given and hmac.compare_digest(given.encode(), settings.token.encode()):
        return True
    return bool(cookie) and _cookie_valid(settings.token, str(cookie)) and _same_origin(origin, host)


class Throttle:
    """Failed sign-ins (a wrong token at login, or in an upload's Authorization header)
    per client address: from LOGIN_FAILURES within LOGIN_WINDOW seconds on, every try from
    that address is refused (429) until the oldest failure leaves the window, the right
    token included, so guessing runs at LOGIN_FAILURES a minute at most."""

    def __init__(self) -> None:
        self._failures: dict[str, list[float]] = {}

    def wait(self, client: str) -> float:
        """Seconds until ``client`` may try again (0: now)."""
        now = time.monotonic()
        recent = [t for t in self._failures.get(client, []) if now - t < LOGIN_WINDOW]
        if recent:
            self._failures[client] = recent
        else:
            self._failures.pop(client, None)
        return LOGIN_WINDOW - (now - recent[0]) if len(recent) >= LOGIN_FAILURES else 0.0

    def fail(self, client: str) -> None:
        if len(self._failures) > 10_000:  # bounded: forget the oldest addresses
            for key in list(self._failures)[:5_000]:
                del self._failures[key]
        self._failures.setdefault(client, []).append(time.monotonic())


def allowed_host_names(listen_host: str, extra: tuple[str, ...]) -> frozenset[str] | None:
    """The names a request's Host may give (lowercase, no port), or None where any IP
    address may (a server on 0.0.0.0 or ::, reached by whatever address the machine has;
    a name still has to be listed). Checked against DNS rebinding: another site's name
    that resolves to this server gets no answer."""
    names = {h.strip().lower().strip("[]") for h in extra if h.strip()}
    host = listen_host.strip().lower().strip("[]")
    if host in ("0.0.0.0", "::", ""):
        return None
    names.add(host)
    if host in LOOPBACK_NAMES:
        names |= LOOPBACK_NAMES
    return frozenset(names)


def host_allowed(header: str, listen_host: str, extra: tuple[str, ...]) -> bool:
    """Whether a request's Host header names this server (``allowed_host_names``)."""
    import ipaddress

    try:
        name = (urlsplit("//" + header).hostname or "").lower()
    except ValueError:
        return False
    if not name:
        return False
    allowed = allowed_host_names(listen_host, extra)
    if allowed is None:  # any address of the machine; names must be loopback ones or listed
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return name in LOOPBACK_NAMES or name in {h.strip().lower() for h in extra}
    return name in allowed


class RequestGuard:
    """ASGI middleware before every route: a Host that is not this server's is refused
    (421), and so is a state-changing request (POST, PUT, PATCH, DELETE) whose Origin, or
    without one whose Referer, is not this server's own (403): another site's page cannot
    upload into the board (a cross-site form or fetch is a CORS "simple request", sent
    without asking) nor read it through a rebound DNS name. A request with neither (curl,
    scripts) goes on to the token check."""

    def __init__(self, app: Any, settings: ServeSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        refusal = None
        if not host_allowed(host, self.settings.listen_host, self.settings.allow_hosts):
            refusal = (421, f"this server does not answer to the host name {host!r} (see cclq serve --allow-host)")
        elif scope["method"] in STATE_CHANGING:
            source = headers.get("origin", headers.get("referer"))
            if source is not None and urlsplit(source).netloc.lower() != host.lower():
                refusal = (
                    403,
                    "a request from another site's page (its Origin or Referer is not this server): refused",
                )
        if refusal is None:
            await self.app(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        status, message = refusal
        await JSONResponse({"error": message, "message": message}, status_code=status)(scope, receive, send)


LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>cclq serve: sign in</title>
<link rel="icon" href="data:,"></head><body><h1>Sign this browser in for uploads</h1>
<p>This server needs a token for uploads. Enter it once: the browser keeps a cookie for this site, so
that the site's own upload form (CCL-Bench's page sends no token) works.</p>
<form method="post" action="/_serve/login"><input type="password" name="token" placeholder="token" required>
<button type="submit">Sign in</button></form>{message}</body></html>"""


UPLOAD_FORM = """
<section id="cclq-upload" class="toolbar" style="margin:1em">
<form id="upload-form">
<strong>Upload a trace folder</strong>
<input type="file" id="upload-files" name="files" multiple required>
<input type="text" id="upload-group" name="group_name" placeholder="group / workload name" required>
<input type="password" id="upload-token" placeholder="token (if the server has one)">
<button type="submit" id="upload-submit">Upload</button>
<span id="upload-status" role="status"></span>
</form>
</section>
<script src="/_serve/upload.js"></script>
"""
UPLOAD_JS = """// cclq serve: posts the form to /api/upload, polls the job, reloads the board when it lands
(function () {
  const form = document.getElementById("upload-form");
  const status = document.getElementById("upload-status");
  function say(text) { status.textContent = text; }
  async function poll(id) {
    const r = await fetch("/api/results/" + encodeURIComponent(id));
    const body = await r.json();
    if (body.status === "done") { say("done: reloading the board"); location.reload(); return; }
    if (body.status === "error" || !r.ok) { say("failed: " + (body.error || r.status)); return; }
    say(body.status + " ...");
    setTimeout(function () { poll(id); }, 500);
  }
  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const data = new FormData();
    for (const f of document.getElementById("upload-files").files) data.append("files", f, f.name);
    data.append("group_name", document.getElementById("upload-group").value);
    const headers = {};
    const token = document.getElementById("upload-token").value;
    if (token) headers["Authorization"] = "Bearer " + token;
    say("uploading ...");
    const r = await fetch("/api/upload", {method: "POST", body: data, headers: headers});
    const body = await r.json();
    if (!r.ok) { say("refused: " + body.error); return; }
    say("queued as " + body.upload_id);
    poll(body.upload_id);
  });
})();
"""
PLACEHOLDER = """<!doctype html><html><head><meta charset="utf-8"><title>cclq benchmark board</title>
<link rel="icon" href="data:,"></head>
<body><h1>cclq benchmark board</h1><p>No workload yet: upload a trace folder below.</p></body></html>"""


def board_index(board_dir: Path) -> str:
    """The board's index.html (or a placeholder before the first build) with the upload
    form before </body>."""
    path = board_dir / "index.html"
    html = path.read_text(encoding="utf-8") if path.is_file() else PLACEHOLDER
    at = html.rfind("</body>")
    return html[:at] + UPLOAD_FORM + html[at:] if at >= 0 else html + UPLOAD_FORM


def create_app(settings: ServeSettings, queue: JobQueue | None = None) -> Any:
    """The ASGI app. ``queue`` defaults to a new JobQueue over the settings."""
    import anyio
    from python_multipart.multipart import MultipartParser, parse_options_header
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    board = None if settings.site_dir is not None else settings.board_dir
    uploads = settings.data_dir / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    jobs = queue or JobQueue(
        JobSettings(
            settings.warehouse,
            board,
            settings.config_path,
            settings.workers,
            settings.queue_size,
            settings.job_timeout,
            settings.job_memory_mb,
        ),
        state_dir=uploads,
    )
    if queue is None:
        jobs.recover(uploads)  # what a stopped server left: queued jobs run, running ones fail
        jobs.sweep_every(uploads, settings.keep_uploads_hours * 3600)
    static_root = settings.site_dir if settings.site_dir is not None else settings.board_dir
    static_root.mkdir(parents=True, exist_ok=True)

    throttle = Throttle()

    def error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
        # `error` as CCL-Bench's server sends it; `message` too, which its page displays
        return JSONResponse({"error": message, "message": message, **extra}, status_code=status, headers=headers)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def upload(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204)
        client = request.client.host if request.client else "?"
        header = request.headers.get("authorization")
        if settings.token and header and (wait := throttle.wait(client)):
            return error(
                429,
                f"too many wrong tokens from {client}; try again in {wait:.0f} s",
                headers={"Retry-After": str(int(wait) + 1)},
            )
        if not _authorized(
            settings, header, request.cookies.get(COOKIE), request.headers.get("origin"), request.headers.get("host")
        ):
            if header:
                throttle.fail(client)
            return error(
                401,
                f"a valid token is needed: Authorization: Bearer <token>, or sign this browser in once at {LOGIN_PATH}",
            )
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.limits.max_upload_bytes:
            return error(413, f"the upload is over {settings.limits.max_upload_bytes} bytes")
        ctype, options = parse_options_header(request.headers.get("content-type", ""))
        boundary = options.get(b"boundary")
        if ctype != b"multipart/form-data" or not boundary:
            return error(415, "send multipart/form-data (fields: files, group_name, workload_card)")
        upload_id = new_upload_id()
        folder = uploads / upload_id
        (folder / "incoming").mkdir(parents=True)
        sink = _FormSink(folder / "incoming", settings.limits.max_files)
        try:
            parser = MultipartParser(boundary, sink.callbacks())  # type: ignore[arg-type,unused-ignore]  # a TypedDict of callables (python-multipart absent: Any)
            received = 0
            chunks = request.stream().__aiter__()
            while True:
                try:
                    with anyio.fail_after(settings.body_timeout):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise UploadRefused(
                        408,
                        f"the upload sent nothing for {settings.body_timeout:g} s: "
                        "refused (see cclq serve --body-timeout)",
                    ) from None
                received += len(chunk)
                if received > settings.limits.max_upload_bytes:
                    raise UploadRefused(413, f"the upload is over {settings.limits.max_upload_bytes} bytes")
                parser.write(chunk)
            parser.finalize()
            sink.close()
            body = await anyio.to_thread.run_sync(prepare_upload, settings, upload_id, sink)
        except UploadRefused as e:
            sink.close()
            shutil.rmtree(folder, ignore_errors=True)
            return error(e.status, e.message, **e.extra)
        except Exception as e:  # noqa: BLE001 - a malformed body; nothing of it is kept
            sink.close()
            shutil.rmtree(folder, ignore_errors=True)
            return error(400, f"malformed upload: {type(e).__name__}: {e}")
        job = Job(upload_id, folder, folder / "trace" / body["workload"], log=[])
        if body["card_problems"]:
            job.log.append(f"card: {len(body['card_problems'])} problem(s)")
        if not jobs.submit(job):
            shutil.rmtree(folder, ignore_errors=True)
            return error(503, "the job queue is full; try again later")
        write_json(folder / "upload.json", body)
        return JSONResponse(body)  # 200: CCL-Bench's page checks for exactly that

    async def results(request: Request) -> JSONResponse:
        upload_id = request.path_params["upload_id"]
        if not UPLOAD_ID.match(upload_id):
            return error(404, "Upload ID not found")
        folder = uploads / upload_id
        state = read_json(folder / "job.json")  # the job's process writes it (atomically)
        if not isinstance(state, dict):
            return error(404, "Upload ID not found")
        status = state.get("status")
        log = "\n".join(state.get("log", []))
        if status == "done" and (results := read_json(folder / "results.json")) is not None:
            return JSONResponse({"status": "done", "log": log, "results": results})
        if status == "error":
            return JSONResponse({"status": "error", "log": log, "error": state.get("error")})
        return JSONResponse({"status": status})

    async def api_unknown(request: Request) -> JSONResponse:
        unknown_id = request.url.path.startswith("/api/results/")
        return error(404, "Upload ID not found" if unknown_id else "no such API route")

    async def index(request: Request) -> HTMLResponse:
        if settings.site_dir is not None:  # the site's own page, with its own upload form
            page = settings.site_dir / "index.html"
            return HTMLResponse(
                page.read_text(encoding="utf-8") if page.is_file() else PLACEHOLDER,
                status_code=200 if page.is_file() else 404,
            )
        return HTMLResponse(board_index(settings.board_dir))

    async def login(request: Request) -> Response:
        """GET: the sign-in form; POST (the form): the cookie, then the site. The token is
        taken from a POST body only: a GET with ?token= is refused (URLs end up in logs,
        history and Referer headers)."""
        if not settings.token:
            return RedirectResponse("/", status_code=303)  # nothing to sign in to
        if request.method == "GET":
            if "token" in request.query_params:
                return error(
                    400,
                    "the token is not taken from a URL (it would end up in logs and history): "
                    f"sign in with the form at {LOGIN_PATH} (a POST), or send "
                    "Authorization: Bearer <token>",
                )
            return HTMLResponse(LOGIN_PAGE.format(message=""))
        client = request.client.host if request.client else "?"
        if wait := throttle.wait(client):
            return HTMLResponse(
                LOGIN_PAGE.format(message=f"<p>Too many wrong tokens: try again in {wait:.0f} s.</p>"),
                status_code=429,
                headers={"Retry-After": str(int(wait) + 1)},
            )
        form = await request.form()
        given = str(form.get("token") or "")
        if not given:
            return HTMLResponse(LOGIN_PAGE.format(message=""))
        if not hmac.compare_digest(given.encode(), settings.token.encode()):
            throttle.fail(client)
            return HTMLResponse(LOGIN_PAGE.format(message="<p>That is not the token.</p>"), status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            _cookie_value(settings.token),
            max_age=COOKIE_MAX_AGE,
            httponly=True,
            samesite="strict",
            path="/",
            secure=request.url.scheme == "https",
        )
        return response

    async def upload_js(request: Request) -> Response:
        return Response(UPLOAD_JS, media_type="text/javascript")

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/api/upload", upload, methods=["POST", "OPTIONS"]),
        Route("/api/results/{upload_id}", results, methods=["GET"]),
        Route("/api/{rest:path}", api_unknown, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        Route("/", index, methods=["GET"]),
        Route("/index.html", index, methods=["GET"]),
        Route("/_serve/upload.js", upload_js, methods=["GET"]),
        Route(LOGIN_PATH, login, methods=["GET", "POST"]),
        Mount("/", app=StaticFiles(directory=static_root, check_dir=False)),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        await anyio.to_thread.run_sync(jobs.close)

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.jobs = jobs
    return RequestGuard(app, settings)


def bounded_protocol(header_timeout: float, max_connections: int) -> type:
    """uvicorn's h11 protocol with the bounds it lacks: a connection that has not sent a
    request's headers ``header_timeout`` seconds after it opened (or after its last
    response) is closed, and one opened while ``max_connections`` are is answered 503 and
    closed. Without them 1,700 connections that never sent a header stayed open (the
    descriptor limit was the only bound); uvicorn's keep-alive timeout starts only after
    a first request."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Bounded(H11Protocol):  # type: ignore[misc,unused-ignore]  # uvicorn absent: Any
        _header_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: 31\r\nConnection: close\r\n\r\ntoo many connections; try again\n"
                )
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()  # no request under way: the headers never came

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # the headers are in: the body's own timeout runs in the app

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return Bounded


def serve(settings: ServeSettings, host: str, port: int) -> None:
    """Runs the server until interrupted (builds the board first when the warehouse
    has workloads)."""
    import uvicorn

    from cclq.present.board.build import build_board

    if settings.site_dir is None and settings.warehouse.exists():
        build_board(settings.warehouse, settings.board_dir)
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        http=bounded_protocol(settings.header_timeout, settings.max_connections),
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=64 << 10,
    )
