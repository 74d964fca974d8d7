"""A small local HTTP endpoint: JSON status and the status page that draws it.

Bound to 127.0.0.1 by default, where a request must name loopback in its Host header (a page of
another site rebinding its name to 127.0.0.1 gets a 421). Binding any other address requires a token,
which every request must then carry (`Authorization: Bearer TOKEN` or `?token=TOKEN`).
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, quote, urlparse

from tinynas.errors import TinynasError

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

    def __init__(self, *args, **kwargs) -> None:
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


class StatusServer:
    """Serves `status()` as JSON at /status.json and the page at /."""

    def __init__(self, status: Callable[[], dict], host: str = "127.0.0.1", port: int = 8765, token: str = "",
                 on_page: Callable[[], None] | None = None) -> None:
        if not is_loopback(host) and not token:
            raise StatusServerError(f"refusing to serve status on {host}: binding beyond loopback requires "
                                    f"http_token in the config")
        self.status = status
        self.token = token
        self.loopback = is_loopback(host)  # no token: the Host header must name loopback (DNS rebinding)
        self.on_page = on_page  # called when the page itself is loaded (tests count reloads)
        assets = _page_assets()
        server = self

        class Handler(BaseHTTPRequestHandler):
            # Every read and write times out: a client that connects and says nothing (or sends its headers one
            # byte a minute) loses its connection instead of holding a thread forever.
            timeout = CLIENT_TIMEOUT_SECONDS

            def log_message(self, *args) -> None:  # the service log is not for HTTP noise
                return

            def _authorised(self, query: dict) -> bool:
                if not server.token:
                    return True
                scheme, _, credentials = self.headers.get("Authorization", "").strip().partition(" ")
                offered = credentials.strip() if scheme.lower() == "bearer" else ""
                offered = offered or (query.get("token") or [""])[0]
                # Bytes, compared in constant time: a non-ASCII token is just a wrong one, never a traceback.
                return hmac.compare_digest(offered.encode("utf-8", "surrogateescape"), server.token.encode())

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if len(self.path) > MAX_PATH_BYTES:
                    self._send(414, b'{"error": "request path too long"}', "application/json")
                    return
                if server.loopback and not loopback_host_header(self.headers.get("Host", "")):
                    self._send(421, b'{"error": "this status page answers only requests to localhost"}',
                               "application/json")
                    return
                parsed = urlparse(self.path)
                if not self._authorised(parse_qs(parsed.query)):
                    self._send(401, b'{"error": "token required"}', "application/json")
                elif parsed.path == "/status.json":
                    self._send(200, json.dumps(server.status()).encode(), "application/json")
                elif parsed.path in assets:
                    body, kind = assets[parsed.path]
                    if parsed.path in ("/", "/index.html"):
                        if server.on_page is not None:
                            server.on_page()
                        if server.token:  # the page's own script and style must carry the token too
                            suffix = b"?token=" + quote(server.token).encode()
                            body = body.replace(b'src="page.js"', b'src="page.js' + suffix + b'"').replace(
                                b'href="page.css"', b'href="page.css' + suffix + b'"')
                    self._send(200, body, kind)
                else:
                    self._send(404, b'{"error": "not found"}', "application/json")

        try:
            self._httpd = _BoundedServer((host, port), Handler)
        except OSError as exc:
            raise StatusServerError(f"cannot serve status on {host}:{port}: {exc.strerror}") from None
        self._httpd.daemon_threads = True
        self.address = self._httpd.server_address
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="status http", daemon=True)

    def start(self) -> StatusServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
