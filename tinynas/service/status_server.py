"""A small local HTTP endpoint: JSON status and the status page that draws it.

Bound to 127.0.0.1 by default. Binding any other address requires a token, which every request
must then carry (`Authorization: Bearer TOKEN` or `?token=TOKEN`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
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


class StatusServer:
    """Serves `status()` as JSON at /status.json and the page at /."""

    def __init__(self, status: Callable[[], dict], host: str = "127.0.0.1", port: int = 8765, token: str = "",
                 on_page: Callable[[], None] | None = None) -> None:
        if not is_loopback(host) and not token:
            raise StatusServerError(f"refusing to serve status on {host}: binding beyond loopback requires "
                                    f"http_token in the config")
        self.status = status
        self.token = token
        self.on_page = on_page  # called when the page itself is loaded (tests count reloads)
        assets = _page_assets()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # the service log is not for HTTP noise
                return

            def _authorised(self, query: dict) -> bool:
                if not server.token:
                    return True
                offered = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                offered = offered or (query.get("token") or [""])[0]
                return hmac.compare_digest(offered, server.token)

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
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
            self._httpd = ThreadingHTTPServer((host, port), Handler)
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
