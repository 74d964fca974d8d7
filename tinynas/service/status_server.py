"""A small local HTTP endpoint: JSON status, the status page that draws it, the page's actions and downloads.

Bound to 127.0.0.1 by default, where a request must name loopback in its Host header (a page of
another site rebinding its name to 127.0.0.1 gets a 421). Binding any other address requires a token,
which every request must then carry (`Authorization: Bearer TOKEN` or `?token=TOKEN`).

The page's buttons POST to /action/<kind> (`actions.from_page`): only POST, only with the token where there is one,
only from the page's own origin (a browser's `Origin` must name the host asked), and only with the page's
anti-forgery value (`X-Tinynas-Form`), a secret drawn when the server starts and written into the page itself:
another site's page can make a browser send a request, but cannot read this page to learn the value. The served
model's files and its firmware bundle download from /download/<name>, behind the same token.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, quote, urlparse

from tinynas.errors import TinynasError, user_message

_HTML = "text/html; charset=utf-8"
PAGE_FILES = {"/": ("index.html", _HTML), "/index.html": ("index.html", _HTML),
              "/page.js": ("page.js", "text/javascript; charset=utf-8"), "/page.css": ("page.css", "text/css")}
"""The page (tinynas/service/page/): plain HTML, one small script, one style sheet; no CDN, the device may have
no internet."""


def _page_assets() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("tinynas.service") / "page"
    return {route: (folder.joinpath(name).read_bytes(), kind) for route, (name, kind) in PAGE_FILES.items()}


log = logging.getLogger(__name__)


class StatusServerError(TinynasError, ValueError):
    """An unsafe or impossible binding."""


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1): the only bindings without a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_host_header(value: str) -> bool:
    """Whether an HTTP Host header names this machine's loopback (localhost, 127.x.x.x, [::1], any port).

    A page on another site can make a browser send requests to 127.0.0.1 under its own name (DNS
    rebinding): a loopback binding, which has no token, answers only requests that name loopback.
    """
    host = value.strip().lower()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


MAX_BODY_BYTES = 4096
"""Largest action body read (a user name, a plan, a model id)."""
FORM_HEADER = "X-Tinynas-Form"
FORM_MARKER = b'<meta name="tinynas-form" content="">'
"""Where the page carries its anti-forgery value (index.html)."""
MAX_PATH_BYTES = 4096
"""Longest request path answered (the page's are a few bytes; http.server caps lines at 64 KiB)."""
CLIENT_TIMEOUT_SECONDS = 10.0
MAX_CONNECTIONS = 32
"""Connections served at once; more are closed at once, before anything is read (a flood of idle connections
must not take the service's file descriptors: ~1,010 of them used to end it)."""


def connection_cap() -> int:
    """MAX_CONNECTIONS, or fewer when the descriptor limit is low (systemd's LimitNOFILE, ulimit -n): at most
    half of the descriptors still free, so the service keeps enough for its own files (state, recordings,
    the serial port) however many clients connect."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 16
    return max(1, min(MAX_CONNECTIONS, (soft - used) // 2))


class _BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that serves at most `connection_cap()` clients at once, quiet about those that leave."""

    daemon_threads = True

    def __init__(self, *args, owner: StatusServer, **kwargs) -> None:
        self.owner = owner  # what its requests answer from (_Handler.owner)
        self.max_connections = connection_cap()
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().__init__(*args, **kwargs)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                # No descriptor to accept with: the connection stays queued in the kernel. Wait a little
                # instead of spinning on a listening socket that stays readable.
                time.sleep(0.05)
            raise

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the cap: closed before a byte is read
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        # A client that went away or timed out mid-request is not the service's error: no traceback per client.
        log.debug("status client %s: %s", client_address, sys.exc_info()[1])


def _token_page(given: bool) -> bytes:
    """What a browser without the right token is shown: a short page saying how to get in."""
    why = "The token in this address is not this service's." if given else "This page needs the service's token."
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>tinynas: token needed</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head><body>"
            f"<h1>tinynas on this device</h1><p>{why}</p>"
            "<p>Open the address that <code>tinynas onboard</code> prints: it ends in <code>?token=...</code>. Or add "
            "<code>?token=</code> and the <code>http_token</code> of the service's config to this address; "
            "<code>tinynas service config --config PATH</code> prints that config.</p></body></html>").encode()


class _Handler(BaseHTTPRequestHandler):
    """One request to a StatusServer: the checks (length, Host, token; for an action also origin, anti-forgery value
    and body size), then the status, the page, an action or a download."""

    # http.server makes a handler per request and hands it the listening server as `self.server`; the state it
    # needs (status, token, actions, downloads, the page) is the StatusServer's own, so the listening server
    # carries one reference to it (`owner`) instead of a copy of each field, and the handler reads it there.
    server: _BoundedServer

    @property
    def owner(self) -> StatusServer:
        """The StatusServer this request is for."""
        return self.server.owner

    def setup(self) -> None:
        # Every read and write times out: a client that connects and says nothing (or sends its headers one
        # byte a minute) loses its connection instead of holding a thread forever. Set here rather than as a
        # `timeout` class attribute (read once, at import): each server uses the CLIENT_TIMEOUT_SECONDS it was
        # made with, as when the handler class was built in StatusServer.__init__ (a test lowers it).
        self.request.settimeout(self.owner.client_timeout)
        super().setup()

    def log_message(self, *args) -> None:  # the service log is not for HTTP noise
        return

    def _authorised(self, query: dict) -> bool:
        if not self.owner.token:
            return True
        scheme, _, credentials = self.headers.get("Authorization", "").strip().partition(" ")
        offered = credentials.strip() if scheme.lower() == "bearer" else ""
        offered = offered or (query.get("token") or [""])[0]
        # Bytes, compared in constant time: a non-ASCII token is just a wrong one, never a traceback.
        return hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), self.owner.token.encode())

    def _send(self, code: int, body: bytes, kind: str, headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, value: dict, headers: dict | None = None) -> None:
        self._send(code, json.dumps(value).encode(), "application/json", headers)

    def _admitted(self) -> dict | None:
        """The query of a request that may be answered, or None once it was refused (too long, not to
        loopback on a loopback binding, without the token)."""
        if len(self.path) > MAX_PATH_BYTES:
            self._json(414, {"error": "request path too long"})
            return None
        if self.owner.loopback and not loopback_host_header(self.headers.get("Host", "")):
            self._json(421, {"error": "this status page answers only requests to localhost"})
            return None
        query = parse_qs(urlparse(self.path).query)
        if not self._authorised(query):
            given = bool(query.get("token") or self.headers.get("Authorization"))
            if "text/html" in self.headers.get("Accept", ""):  # a person's browser: how to get in, not bare JSON
                self._send(401, _token_page(given), _HTML)
            else:
                self._json(401, {"error": "wrong token" if given else "token required"})
            return None
        return query

    def _same_origin(self) -> bool:
        """A browser's request from the page itself: its Origin (when sent) names the host asked, and no
        fetch metadata says it came from another site."""
        origin = self.headers.get("Origin")
        host = self.headers.get("Host", "")
        if origin is not None and urlparse(origin).netloc.lower() != host.lower():
            return False
        return self.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if self._admitted() is None:
            return
        path = urlparse(self.path).path
        if not path.startswith("/action/") or self.owner.actions is None:
            self._json(404, {"error": "not found"})
            return
        if not self._same_origin():
            self._json(403, {"error": "actions are taken only from this device's own page"})
            return
        offered = self.headers.get(FORM_HEADER)
        if offered is None:
            self._json(403, {"error": f"an action needs the {FORM_HEADER} header: the value of the page's "
                                      f"<meta name=\"tinynas-form\"> (it changes when the service restarts)"})
            return
        if not hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), self.owner.form_key.encode()):
            self._json(403, {"error": "this page is out of date (the service restarted): reload it"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self._json(413, {"error": f"an action's body is at most {MAX_BODY_BYTES} bytes"})
            return
        try:
            fields = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            self._json(400, {"error": "an action's body is a JSON object"})
            return
        kind = path.removeprefix("/action/")
        try:
            said = self.owner.actions(kind, fields)
        except TinynasError as exc:
            self._json(400, {"error": user_message(exc) or str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - a bug in an action must not end the page's thread silently
            log.error("page action %s failed with an internal error", kind, exc_info=exc)
            self._json(500, {"error": f"internal error {type(exc).__name__} (a bug: see the service log)"})
            return
        log.info("page: %s", said.splitlines()[-1] if said else kind)
        self._json(200, {"message": said})

    def _download(self, name: str) -> None:
        try:
            found = self.owner.downloads(name) if self.owner.downloads is not None else None
        except TinynasError as exc:
            self._json(404, {"error": user_message(exc) or str(exc)})
            return
        if found is None:
            self._json(404, {"error": f"no {name} to download (is a model served?)"})
            return
        body, kind, filename = found
        self._send(200, body, kind, {"Content-Disposition": f'attachment; filename="{filename}"'})

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        try:
            self._get()
        except (ConnectionError, TimeoutError):
            raise  # the client went away: nothing to answer (handle_error logs it at debug)
        except Exception as exc:  # noqa: BLE001 - whatever a model folder holds, the page answers
            log.error("status page GET %s failed with an internal error", self.path[:200], exc_info=exc)
            self._json(500, {"error": f"internal error {type(exc).__name__} (a bug: see the service log)"})

    def _get(self) -> None:
        query = self._admitted()
        if query is None:
            return
        parsed = urlparse(self.path)
        if parsed.path.startswith("/action/"):
            self._json(405, {"error": "actions are POSTed by the page's buttons"}, {"Allow": "POST"})
        elif parsed.path.startswith("/download/"):
            self._download(parsed.path.removeprefix("/download/"))
        elif parsed.path == "/status.json":
            self._send(200, json.dumps(self.owner.status()).encode(), "application/json")
        elif parsed.path in self.owner.assets:
            body, kind = self.owner.assets[parsed.path]
            if parsed.path in ("/", "/index.html"):
                if self.owner.on_page is not None:
                    self.owner.on_page()
                if self.owner.token:  # the page's own script and style must carry the token too
                    suffix = b"?token=" + quote(self.owner.token).encode()
                    body = body.replace(b'src="page.js"', b'src="page.js' + suffix + b'"').replace(
                        b'href="page.css"', b'href="page.css' + suffix + b'"')
                body = body.replace(FORM_MARKER, FORM_MARKER.replace(
                    b'content=""', b'content="' + self.owner.form_key.encode() + b'"'))
            self._send(200, body, kind)
        else:
            self._send(404, b'{"error": "not found"}', "application/json")


class StatusServer:
    """Serves `status()` as JSON at /status.json and the page at /, once started."""

    def __init__(self, status: Callable[[], dict], host: str = "127.0.0.1", port: int = 8765, token: str = "",
                 on_page: Callable[[], None] | None = None, actions: Callable[[str, dict], str] | None = None,
                 downloads: Callable[[str], tuple[bytes, str, str] | None] | None = None) -> None:
        if not is_loopback(host) and not token:
            raise StatusServerError(f"refusing to serve status on {host}: binding beyond loopback requires "
                                    f"http_token in the config")
        self.host, self.port = host, port
        self.status = status
        self.token = token
        self.loopback = is_loopback(host)  # no token: the Host header must name loopback (DNS rebinding)
        self.on_page = on_page  # called when the page itself is loaded (tests count reloads)
        self.actions = actions  # (kind, fields) -> what was asked, in words; TinynasError: refused in one line
        self.downloads = downloads  # name -> (body, content type, file name), None: no such file
        self.form_key = secrets.token_urlsafe(24)
        self.assets = _page_assets()
        self.client_timeout = CLIENT_TIMEOUT_SECONDS
        self._httpd: _BoundedServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StatusServer:
        """Bind the socket and serve in a background thread (StatusServerError: the address cannot be bound)."""
        if self._httpd is not None:
            raise RuntimeError("the status server is already started")
        try:
            self._httpd = _BoundedServer((self.host, self.port), _Handler, owner=self)
        except OSError as exc:
            raise StatusServerError(f"cannot serve status on {self.host}:{self.port}: {exc.strerror}") from None
        self._httpd.daemon_threads = True
        self.address = self._httpd.server_address  # where it listens (port 0 asked: the port given)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="status http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (nothing to stop if it was never started)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
