import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from devtools.machine_speed import slowdown
from tests.support.net import free_port
from tinynas.service.status_server import StatusServer, StatusServerError

STATUS = {"state": "SERVING", "user": "alice", "error": "", "time": 1.0e9, "deployed":
          {"model": "/x/model.tflite", "user": "alice", "accuracy": 0.9}, "collection": {}, "search": {},
          "predictions": [{"end_sample": 400, "label": "fist", "confidence": 0.93, "smoothed": "fist"}]}


def test_serves_json_and_page_on_loopback():
    server = StatusServer(lambda: STATUS, port=free_port()).start()
    try:
        base = f"http://127.0.0.1:{server.address[1]}"
        assert json.loads(urllib.request.urlopen(base + "/status.json", timeout=5).read()) == STATUS
        page = urllib.request.urlopen(base + "/", timeout=5).read().decode()
        assert "<title>tinynas</title>" in page and 'src="page.js"' in page
        assert "status.json" in urllib.request.urlopen(base + "/page.js", timeout=5).read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/nope", timeout=5)
        assert missing.value.code == 404
    finally:
        server.stop()


def test_refuses_non_loopback_binding_without_a_token():
    with pytest.raises(StatusServerError, match="requires http_token"):
        StatusServer(lambda: STATUS, host="0.0.0.0", port=free_port())


def test_token_is_required_when_set():
    server = StatusServer(lambda: STATUS, host="0.0.0.0", port=free_port(), token="s3cret").start()
    try:
        base = f"http://127.0.0.1:{server.address[1]}/status.json"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base, timeout=5)
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "?token=wrong", timeout=5)
        assert json.loads(urllib.request.urlopen(base + "?token=s3cret", timeout=5).read())["user"] == "alice"
        authorised = urllib.request.Request(base, headers={"Authorization": "Bearer s3cret"})
        assert urllib.request.urlopen(authorised, timeout=5).status == 200
        # The page and its script and style need the token as well; the page passes it on to them.
        root = f"http://127.0.0.1:{server.address[1]}/"
        for asset in ("", "page.js", "page.css"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(root + asset, timeout=5)
            assert refused.value.code == 401
        page = urllib.request.urlopen(root + "?token=s3cret", timeout=5).read().decode()
        for asset in ('src="page.js?token=s3cret"', 'href="page.css?token=s3cret"'):
            assert asset in page
            url = root + asset.split('"')[1]
            assert urllib.request.urlopen(url, timeout=5).status == 200
    finally:
        server.stop()


def test_page_renders_in_a_headless_browser(tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        if os.environ.get("CI"):  # devtools/test.sh installs it: a skip in CI would check nothing
            pytest.fail("no Chromium in CI: devtools/test.sh should have installed it (apt-get install chromium)")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    server = StatusServer(lambda: STATUS, port=free_port()).start()
    try:
        shot = tmp_path / "status.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000",
                        f"--screenshot={shot}", "--window-size=900,700",
                        f"http://127.0.0.1:{server.address[1]}/"], check=True, capture_output=True, timeout=60)
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking", "--disable-component-update",
                              "--disable-sync", f"--user-data-dir={tmp_path / 'profile2'}",
                              "--virtual-time-budget=3000", "--dump-dom", f"http://127.0.0.1:{server.address[1]}/"],
                             check=True, capture_output=True, text=True, timeout=60).stdout
        assert shot.stat().st_size > 5000
        assert 'data-state="SERVING"' in dom and "fist" in dom  # the script filled the page from status.json
    finally:
        server.stop()


def test_odd_tokens_and_a_lower_case_scheme_get_an_answer_not_a_traceback(caplog):
    server = StatusServer(lambda: STATUS, host="0.0.0.0", port=free_port(), token="s3cret-token-1234").start()
    base = f"http://127.0.0.1:{server.address[1]}/status.json"
    try:
        for url, headers in ((base + "?token=%C3%A9", {}), (base, {"Authorization": "Bearer \u00e9"}),
                             (base, {"Authorization": "Basic s3cret-token-1234"})):
            request = urllib.request.Request(url, headers={k: v.encode("utf-8").decode("latin-1")
                                                           for k, v in headers.items()})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=5)
            assert refused.value.code == 401
        lower = urllib.request.Request(base, headers={"Authorization": "bearer s3cret-token-1234"})
        assert json.loads(urllib.request.urlopen(lower, timeout=5).read())["user"] == "alice"
    finally:
        server.stop()
    assert "Traceback" not in caplog.text


def test_a_flood_of_idle_connections_does_not_shut_out_an_authenticated_client(monkeypatch):
    """More idle connections than the cap (and slow ones): the server closes what it cannot serve, times out the
    silent ones, and still answers a client with the token."""
    import socket

    from tinynas.service import status_server

    monkeypatch.setattr(status_server, "CLIENT_TIMEOUT_SECONDS", 1.0)
    server = StatusServer(lambda: STATUS, host="0.0.0.0", port=free_port(), token="s3cret-token-1234").start()
    port = server.address[1]
    idle = []
    try:
        for _ in range(status_server.MAX_CONNECTIONS * 4):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        idle[0].sendall(b"GET /status.json HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        deadline = time.monotonic() + 30
        while True:  # the silent ones time out within CLIENT_TIMEOUT_SECONDS: a slot frees for a real client
            try:
                answer = urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/status.json?token=s3cret-token-1234", timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert time.monotonic() < deadline, "no slot ever freed for an authenticated client"
                time.sleep(0.2)
        assert json.loads(answer)["user"] == "alice"
    finally:
        for connection in idle:
            connection.close()
        server.stop()


def test_a_loopback_page_answers_only_requests_that_name_loopback():
    """DNS rebinding: a site's own name resolving to 127.0.0.1 must not read the tokenless loopback page."""
    server = StatusServer(lambda: STATUS, port=free_port()).start()
    port = server.address[1]
    try:
        for host, code in (("evil.example", 421), (f"evil.example:{port}", 421), (f"localhost:{port}", 200),
                           (f"127.0.0.1:{port}", 200), (f"[::1]:{port}", 200)):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/status.json", headers={"Host": host})
            try:
                answer = urllib.request.urlopen(request, timeout=5)
                assert (answer.status, host) == (code, host)
            except urllib.error.HTTPError as refused:
                assert (refused.code, host) == (code, host)
        with pytest.raises(urllib.error.HTTPError) as long_path:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/" + "a" * 5000, timeout=5)
        assert long_path.value.code == 414
    finally:
        server.stop()


def test_a_client_that_goes_away_mid_answer_leaves_no_traceback(caplog, capfd):
    import logging
    import struct

    big = {**STATUS, "padding": "x" * 2_000_000}  # an answer longer than the socket buffers
    server = StatusServer(lambda: big, port=free_port()).start()
    try:
        with caplog.at_level(logging.DEBUG, logger="tinynas"):
            for _ in range(5):
                client = socket.create_connection(("127.0.0.1", server.address[1]), timeout=5)
                client.sendall(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                client.recv(100)
                # Gone at once, with a reset (a phone's page closed, a tab killed).
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
            time.sleep(0.5)
            assert json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.address[1]}/status.json",
                                                     timeout=10).read())["user"] == "alice"  # still serving
    finally:
        server.stop()
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_request_that_fails_inside_is_answered_with_one_line_and_logged(caplog):
    """Whatever a handler meets (a bug, a damaged file the readers missed), the client gets an answer: before, a GET
    whose status raised closed the connection with nothing said and nothing logged."""
    def broken():
        raise KeyError("cost_estimate")

    def broken_download(name):
        raise TypeError("unexpected")

    server = StatusServer(broken, port=free_port(), downloads=broken_download).start()
    try:
        base = f"http://127.0.0.1:{server.address[1]}"
        for path in ("/status.json", "/download/card.json"):
            with pytest.raises(urllib.error.HTTPError) as failed:
                urllib.request.urlopen(base + path, timeout=5)
            assert failed.value.code == 500
            assert json.loads(failed.value.read())["error"].startswith("internal error")
        assert urllib.request.urlopen(base + "/", timeout=5).status == 200  # still up
    finally:
        server.stop()
    assert sum("failed with an internal error" in record.message for record in caplog.records) == 2


@pytest.mark.slow  # a real anomaly search on the command line (about a minute), then the service's threads
def test_a_scorer_the_command_line_made_is_served_with_the_services_alarm(tmp_path, caplog):
    """`tinynas search --task anomaly` writes no serving.alarm (the service adds it when it deploys its own): such a
    folder, served by `tinynas serve`, turned /status.json into a 500 and the status thread into a traceback twice
    a second (KeyError 'k'). Served now with the config's alarm (alarm_k of alarm_n, what the live scorer raises
    by), through the real serve and status threads and the real status server; a dead sensor raises the alarm."""
    import logging
    import sys

    import numpy as np

    from firmware_bridge.link import Link
    from firmware_bridge.protocol import Hello, Samples
    from firmware_bridge.ring import SampleRing
    from tests.support.anomaly_machine import LENGTH, machine, only
    from tinynas.service import threads
    from tinynas.service.config import load_config
    from tinynas.service.context import ServiceContext
    from tinynas.service.device import Device
    from tinynas.service.onboarding import take_request
    from tinynas.service.status import page_snapshot

    normal = only(machine(seed=2, count=200), [0])
    normal.save(tmp_path / "normal.npz")
    searched = subprocess.run([sys.executable, "-m", "tinynas.cli", "search", "--task", "anomaly", "--data",
                               f"npz:{tmp_path / 'normal.npz'}", "--target", "STM32C011F6P6", "--out",
                               str(tmp_path / "out"), "--budget", "2h", "--candidates", "2", "--epochs", "1",
                               "--final-epochs", "1",
                               "--false-alarm-rate", "0.05", "--strategy", "random", "--scorer", "classical"],
                              capture_output=True, text=True, timeout=900)
    assert searched.returncode == 0, searched.stderr
    assert "serving" not in json.loads((tmp_path / "out" / "card.json").read_text())
    data_dir = tmp_path / "service"
    shutil.copytree(tmp_path / "out", data_dir / "profiles" / "motor" / "deployed" / "20261207-080000")
    config_file = tmp_path / "service.toml"
    config_file.write_text(f'data_dir = "{data_dir}"\nalarm_k = 2\nalarm_n = 4\nhop_seconds = {LENGTH / 12000}\n')
    asked = subprocess.run([sys.executable, "-m", "tinynas.cli", "serve", "--user", "motor", "--config",
                            str(config_file)], capture_output=True, text=True, timeout=300)
    assert asked.returncode == 0, asked.stderr
    service = ServiceContext(load_config(config_file)).open()
    ring = SampleRing(1, 100 * LENGTH)
    service.device = Device(Link("loop://"), Hello("motor", "1", 1, 12000.0, "int16"), ring)
    service.apply(take_request(service))  # what the idle service does with the request `tinynas serve` left
    assert service.state.deployed is not None and service.state.deployed.scorer
    caplog.set_level(logging.INFO)
    side = [threads.supervise(service, name, loop) for name, loop in (("serve", threads.serve),
                                                                      ("write_status", threads.write_status))]
    server = StatusServer(lambda: page_snapshot(service), port=free_port()).start()
    try:
        url = f"http://127.0.0.1:{server.address[1]}/status.json"
        # Bounded by what the serve thread scored, and at most 120 s scaled to this machine's measured speed.
        deadline, sent, scored = time.monotonic() + 120 * slowdown(), 0, 0
        while True:
            # The motor's sensor, a window per hop: normal running (until five are scored), then dead (all zero).
            window = normal.x[sent % len(normal.x)] if scored < 5 else np.zeros((LENGTH, 1), np.float32)
            ring.add(Samples(sent * LENGTH, window))
            sent += 1
            status = json.loads(urllib.request.urlopen(url, timeout=30).read())  # a 500 raises here
            scored = max(scored, len(status["predictions"]))
            if status.get("alarm", {}).get("raised") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        while not (data_dir / "status.json").is_file() and time.monotonic() < deadline:  # written twice a second
            time.sleep(0.1)
        written = json.loads((data_dir / "status.json").read_text())  # what `tinynas service status` reads
    finally:
        server.stop()
        service.stopping.set()
        for thread in side:
            thread.join(30)
    alarm = status["alarm"]
    assert alarm["raised"] and alarm["score"] >= 1e6  # the dead sensor: anomalous, a number
    assert alarm["debounce"] == "2 of the last 4 windows above the threshold"
    assert written["alarm"]["debounce"] == alarm["debounce"]
    assert [p["smoothed"] for p in status["predictions"]][-1] == "ALARM"
    assert any(p["label"] == "normal" for p in status["predictions"])  # normal running read as such before
    assert status["threads"]["serve"]["restarts"] == 0 and status["threads"]["write_status"]["restarts"] == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
