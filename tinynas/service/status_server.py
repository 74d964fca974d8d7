"""A small local HTTP endpoint: JSON status and a minimal HTML page.

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
from urllib.parse import parse_qs, urlparse

from tinynas.errors import TinynasError

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tinynas</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body { font: 15px/1.4 system-ui, sans-serif; margin: 1.5em; max-width: 46em; color: #222; }
 h1 { font-size: 1.3em; } .state { font-size: 1.6em; font-weight: 600; }
 table { border-collapse: collapse; } td, th { padding: 2px 10px 2px 0; text-align: left; }
 .box { border: 1px solid #ccc; border-radius: 6px; padding: 0.6em 1em; margin: 0.8em 0; }
 .muted { color: #777; } .error { color: #b00; }
</style></head>
<body>
<h1>tinynas on this device</h1>
<div class="box"><div class="state" id="state">...</div><div id="who" class="muted"></div>
<div id="error" class="error"></div></div>
<div class="box"><b>Collection</b><div id="collection" class="muted">-</div></div>
<div class="box"><b>Search</b><div id="search" class="muted">-</div></div>
<div class="box"><b>Serving</b><div id="serving" class="muted">-</div>
<table id="predictions"></table></div>
<script>
const token = new URLSearchParams(location.search).get("token");
const url = "status.json" + (token ? "?token=" + encodeURIComponent(token) : "");
function text(id, value) { document.getElementById(id).textContent = value; }
async function refresh() {
  try {
    const s = await (await fetch(url)).json();
    const r = s.rewear || {};
    text("state", s.state + (s.paused ? " - paused" : "") + (r.phase ? ` - re-wear of ${r.user}: ${r.phase}: ${r.text || ""}` : ""));
    text("who", (s.user ? "user " + s.user + " - " : "") + "updated " + new Date(s.time * 1000).toLocaleTimeString());
    text("error", s.error || "");
    const c = s.collection || {};
    text("collection", c.total ? `${c.accepted} of ${c.total} windows` + (c.prompt ? ` - now: ${c.prompt}` : "") : "-");
    const q = s.search || {};
    text("search", q.trials !== undefined ? `${q.trials} candidates, best ${q.best || "-"}, ${Math.round(q.seconds_left || 0)} s left` : "-");
    const d = s.deployed || {};
    text("serving", d.model ? `model for ${d.user}: int8 accuracy ${(d.accuracy * 100).toFixed(1)} %` : "no model yet");
    const rows = (s.predictions || []).slice(-8).reverse().map(p =>
      `<tr><td>${p.smoothed}</td><td>${(p.confidence * 100).toFixed(0)} %</td><td class="muted">sample ${p.end_sample}</td></tr>`);
    document.getElementById("predictions").innerHTML = rows.join("");
  } catch (e) { text("error", "status unavailable: " + e); }
}
refresh(); setInterval(refresh, 1000);
</script>
</body></html>
"""


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

    def __init__(self, status: Callable[[], dict], host: str = "127.0.0.1", port: int = 8765, token: str = "") -> None:
        if not is_loopback(host) and not token:
            raise StatusServerError(f"refusing to serve status on {host}: binding beyond loopback requires "
                                    f"http_token in the config")
        self.status = status
        self.token = token
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
                elif parsed.path in ("/", "/index.html"):
                    self._send(200, PAGE.encode(), "text/html; charset=utf-8")
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
