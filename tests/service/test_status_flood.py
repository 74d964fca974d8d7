"""The real `tinynas service run` under a connection flood with a low descriptor limit (systemd's LimitNOFILE
or `ulimit -n`): more idle connections than the server's cap and than the process may hold descriptors.
It stays up, keeps writing its own files, and serves a client that brings the token."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.support.net import free_port
from tinynas.service.status_server import CLIENT_TIMEOUT_SECONDS

TOKEN = "flood-test-token-0123456789"
LIMIT = 40
"""Descriptors the service may hold: about 10 of its own at rest, so 300 connections would exhaust them."""


def _get(url: str, token: str | None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, b""


def _low_limit() -> None:  # in the child, before exec: as systemd's LimitNOFILE= does
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@pytest.mark.slow
def test_the_service_outlives_a_flood_beyond_its_cap_and_its_descriptors(tmp_path):
    http = free_port()
    (tmp_path / "dev").mkdir()
    config = tmp_path / "tinynas.toml"
    config.write_text(f'port = "{tmp_path / "dev" / "tty0"}"\ndata_dir = "{tmp_path / "data"}"\n'
                      f'http_port = {http}\nhttp_token = "{TOKEN}"\n')
    log = open(tmp_path / "service.log", "w")
    service = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stdout=log, stderr=subprocess.STDOUT, preexec_fn=_low_limit)
    url = f"http://127.0.0.1:{http}/status.json"
    flood: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 120  # the service's start on a loaded machine
        while _safe_get(url) != 200:
            assert service.poll() is None, (tmp_path / "service.log").read_text()
            assert time.monotonic() < deadline, "the service never answered"
            time.sleep(0.2)
        status_file = tmp_path / "data" / "status.json"
        # Waves of idle connections that never send a byte, held open: 300 > the cap (32) > LIMIT.
        for _ in range(3):
            for _ in range(100):
                try:
                    flood.append(socket.create_connection(("127.0.0.1", http), timeout=5))
                except OSError:
                    break  # the kernel's queue is full: the flood has all it can get
            time.sleep(0.5)
        assert len(flood) > LIMIT
        assert _safe_get(url, None) in (401, -1)  # no token: never served, flood or not
        served, deadline = None, time.monotonic() + 4 * CLIENT_TIMEOUT_SECONDS + 30
        while served is None and time.monotonic() < deadline:
            code, body = _safe_get(url, TOKEN, body=True)
            if code == 200:
                served = json.loads(body)
            else:
                time.sleep(0.5)
        assert served is not None and "state" in served, "the authenticated client was never served"
        assert service.poll() is None, "the service exited under the flood"
        before = status_file.stat().st_mtime_ns
        time.sleep(2)
        assert status_file.stat().st_mtime_ns > before  # it still writes its own status twice a second
    finally:
        for connection in flood:
            connection.close()
        if service.poll() is None:
            service.terminate()
            service.wait(60)
        log.close()
    output = (tmp_path / "service.log").read_text()
    assert "Traceback" not in output and "too many open files" not in output.lower(), output


def _safe_get(url: str, token: str | None = TOKEN, body: bool = False):
    try:
        code, data = _get(url, token)
    except OSError:  # refused, reset or closed over the cap
        code, data = -1, b""
    return (code, data) if body else code
