"""The service's side threads cannot die silently: a failure is logged, counted and the loop restarted."""

import threading
import time
from types import SimpleNamespace

from tinynas.service import threads


def _service():
    return SimpleNamespace(stopping=threading.Event(), thread_health={}, injected=set(),
                           state=SimpleNamespace(state="COLLECTING"))


def _wait(condition, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_side_thread_that_raises_is_logged_counted_and_restarted(caplog):
    service, runs = _service(), []

    def loop(svc):
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise ValueError("write to closed file")
        svc.stopping.wait()

    thread = threads.supervise(service, "read_stream", loop)
    _wait(lambda: len(runs) >= 2)
    assert service.thread_health["read_stream"]["restarts"] == 1
    assert "ValueError: write to closed file" in service.thread_health["read_stream"]["last_error"]
    assert "the read_stream thread failed and is restarted" in caplog.text and "Traceback" in caplog.text
    service.stopping.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_loop_failing_at_once_again_and_again_is_retried_more_slowly_not_spun():
    service, runs = _service(), []

    def loop(_svc):
        runs.append(time.monotonic())
        raise RuntimeError("always")

    thread = threads.supervise(service, "serve", loop)
    _wait(lambda: len(runs) >= 4)
    service.stopping.set()
    thread.join(10)
    pauses = [b - a for a, b in zip(runs, runs[1:])]
    assert pauses[2] > pauses[0] and len(runs) < 50  # backing off, not spinning


def test_an_injected_fault_fires_once_in_its_phase(monkeypatch):
    monkeypatch.setenv(threads.FAULT_VARIABLE, "read_stream@SEARCHING")
    service = _service()
    threads._inject("read_stream", service)  # COLLECTING: not its phase
    service.state.state = "SEARCHING"
    try:
        threads._inject("read_stream", service)
        raise AssertionError("no fault raised")
    except threads.InjectedFault:
        pass
    threads._inject("read_stream", service)  # once only


def test_a_stop_request_left_before_the_service_started_does_not_stop_it(tmp_path):
    """`tinynas service stop` while no service ran used to leave a request that stopped the next start."""
    import json
    import time as clock

    requests = tmp_path / "requests"
    requests.mkdir()
    old = requests / "1-stop.json"  # named as `request` names them: time_ns first
    old.write_text(json.dumps({"kind": "stop"}))
    service = SimpleNamespace(stopping=threading.Event(), paths=SimpleNamespace(requests=requests),
                              started_ns=clock.time_ns())
    thread = threading.Thread(target=threads.watch_requests, args=(service,), daemon=True)
    thread.start()
    _wait(lambda: not old.exists())
    service.stopping.set()
    thread.join(5)
    assert not thread.is_alive()  # (had it been taken, SIGTERM would have ended this test run)
