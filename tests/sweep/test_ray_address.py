"""`--engine ray --address`: checked as text before Ray is imported, then asked for its cluster's id within seconds,
before anything is written. A port that accepts connections but is not Ray's (any other server) wrote sweep.json,
printed Ray's log and held the sweep for ever; a real Ray head answers the same question in milliseconds."""

import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from devtools.machine_speed import slowdown
from tinynas.errors import UsageError
from tinynas.sweep import ray_engine
from tinynas.sweep.ray_engine import ADDRESS_TIMEOUT, check_address, parse_address

GRID = '[grid]\nseed = [0, 1]\n[fixed]\ndata = "synthetic:emg"\ntarget = "STM32F030F4P6"\n'


class _NotRay:
    """A plain TCP server on a free port of this machine: `silent` accepts and holds every connection without a
    byte (a service waiting for its own protocol's first word), else it answers each with an HTTP/1 error and
    hangs up (a web server)."""

    def __init__(self, silent: bool) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.silent, self.held, self.accepted = silent, [], 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            self.accepted += 1
            if self.silent:
                self.held.append(connection)
            else:
                with connection:
                    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def server():
    made = []

    def start(silent: bool) -> _NotRay:
        made.append(_NotRay(silent))
        return made[-1]

    yield start
    for one in made:
        one.close()


def _grid(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    return str(grid)


def _refused(run, port: int, why: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr  # no Ray log, no traceback
    assert lines[0].startswith(f"tinynas: error: --address 127.0.0.1:{port}: no Ray head answered at that address")
    assert why in lines[0] and run.stdout == ""


def test_a_server_that_never_answers_is_one_line_after_the_timeout_and_nothing_is_written(tmp_path, server,
                                                                                         cli_in_process, monkeypatch):
    silent = server(silent=True)
    monkeypatch.setattr(ray_engine, "ADDRESS_TIMEOUT", 1.0)  # the same refusal as after 5 s, sooner
    run = cli_in_process("sweep", _grid(tmp_path), "--out", str(tmp_path / "s"), "--engine", "ray", "--address",
                         f"127.0.0.1:{silent.port}")
    _refused(run, silent.port, "nothing answered within 1 s")
    assert silent.accepted >= 1  # it was asked, not judged by its port number
    assert not (tmp_path / "s").exists()  # no sweep.json, no folder


def test_a_web_server_at_the_address_is_one_line_and_nothing_is_written(tmp_path, server, cli_in_process):
    web = server(silent=False)
    run = cli_in_process("sweep", _grid(tmp_path), "--out", str(tmp_path / "s"), "--engine", "ray", "--address",
                         f"127.0.0.1:{web.port}")
    _refused(run, web.port, "something answered, but not as Ray's head does")
    assert web.accepted >= 1 and not (tmp_path / "s").exists()


@pytest.mark.slow
def test_the_real_command_gives_up_on_a_silent_server_within_seconds(tmp_path, server):
    silent = server(silent=True)
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "sweep", _grid(tmp_path), "--out", str(tmp_path / "s"),
                          "--engine", "ray", "--address", f"127.0.0.1:{silent.port}"],
                         capture_output=True, text=True, timeout=300 * slowdown())
    _refused(run, silent.port, f"nothing answered within {ADDRESS_TIMEOUT:g} s")
    assert not (tmp_path / "s").exists()
    # Bounded: the question's deadline and an interpreter's start, not Ray's minute of retries and then for ever.
    # Loose for a loaded machine; a regression hangs until the subprocess's own timeout, far beyond it.
    assert time.monotonic() - started < 60 * slowdown()


def test_nobody_at_the_address_and_a_name_that_does_not_resolve_are_one_line(tmp_path):
    with socket.socket() as closed:  # bound, never listening: the port surely refuses
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        with pytest.raises(UsageError, match=rf"--address 127.0.0.1:{port}: no Ray cluster answers there "
                                             r"\(connection refused\)"):
            check_address(f"127.0.0.1:{port}", timeout=10)
    with pytest.raises(UsageError, match=r"no Ray cluster answers there \(no such host\)"):
        check_address("no-such-host.invalid:6379", timeout=10)  # .invalid never resolves (RFC 6761)


@pytest.mark.parametrize(("address", "host", "port"), [
    ("10.0.0.2:6379", "10.0.0.2", 6379),
    ("[::1]:6379", "::1", 6379),
    ("head.cluster.example.:6379", "head.cluster.example.", 6379),
    ("ray_head-1:1", "ray_head-1", 1),
    ("a" * 63 + ".example:65535", "a" * 63 + ".example", 65535),
])
def test_an_address_a_resolver_takes_is_its_host_and_port(address, host, port):
    assert parse_address(address) == (host, port)


@pytest.mark.parametrize(("address", "why"), [
    ("a" * 64 + ".example:6379", "64 characters, more than 63"),
    ("head..example:6379", "an empty label"),
    ("head.:6379.", "must be HOST:PORT"),
    ("-head:6379", "not a DNS label"),
    ("head-:6379", "not a DNS label"),
    ("hé.example:6379", "not a DNS label"),
    ("he\0ad:6379", "not a DNS label"),
    ("a." * 127 + "bb:6379", "more than DNS allows (253)"),
    ("head:0", "must be HOST:PORT"),
    ("head:65536", "must be HOST:PORT"),
    ("head:٦٣٧٩", "must be HOST:PORT"),  # digits, but not ASCII ones
    ("head:" + "9" * 5000, "must be HOST:PORT"),
    (":6379", "must be HOST:PORT"),
    ("[::g]:6379", "is not an IPv6 address"),
    ("::1:6379", "not a DNS label"),  # an IPv6 address without its brackets
])
def test_an_address_no_resolver_takes_is_one_line_before_any_connection(address, why):
    with pytest.raises(UsageError, match=re.escape(why)) as caught:
        parse_address(address)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


@pytest.mark.slow
def test_a_real_ray_head_answers_the_check_at_once():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        started = time.monotonic()
        check_address(cluster.address, timeout=30 * slowdown())
        assert time.monotonic() - started < 10 * slowdown()  # milliseconds on an idle machine
    finally:
        cluster.shutdown()
