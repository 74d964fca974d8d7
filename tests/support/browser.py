"""A real headless Chromium driven over the DevTools protocol: load a page, click, type, read the DOM.

Kept to what the status-page tests need (no Selenium driver binary, no Playwright download): Chromium is the
apt package `devtools/test.sh` installs, and the protocol is spoken over one WebSocket (websocket-client).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest


def chromium_path() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium in CI: devtools/test.sh should have installed it (apt-get install chromium)")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    return browser


class Browser:
    """One headless Chromium with one tab."""

    def __init__(self, profile: Path, timeout: float = 60.0) -> None:
        import websocket

        self.timeout = timeout
        profile.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=900,1200", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(target for target in json.loads(answer.read()) if target["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout,
                                                  suppress_origin=True)
        self._ids = itertools.count(1)

    def call(self, method: str, **params):
        number = next(self._ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && document.body && document.body.dataset.state")

    def wait_for(self, expression: str, timeout: float | None = None):
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within the timeout: {expression}")
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def text(self, selector: str) -> str:
        return self.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''")

    def close(self) -> None:
        try:
            if getattr(self, "socket", None) is not None:
                self.socket.close()
        finally:
            self.process.kill()
            self.process.wait(10)
