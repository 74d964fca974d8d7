"""`tinynas simulate`'s person and machine: the signs and states they take from a data set."""

import json

import numpy as np
import pytest

from tinynas.cli.simulate import SIGNS_FOR_GESTURES, _signs, _states
from tinynas.data.windows import Windows
from tinynas.errors import UsageError


def _windows(names, length=8):
    y = np.repeat(np.arange(len(names)), 2)
    x = (np.arange(len(y) * length, dtype=np.float32).reshape(len(y), length, 1))
    return Windows(x, y, np.array([str(i) for i in range(len(y))]), tuple(names), 12000.0, ("ch0",), {})


def test_gestures4_signs_are_isl_letters_and_a_mapping_can_add_more():
    by_class = {letter: np.zeros((1, 4, 8)) + i for i, letter in enumerate("ABCD")}
    signs = _signs(by_class, "")
    assert all(signs[name] is by_class[letter] for name, letter in SIGNS_FOR_GESTURES.items())
    assert _signs(by_class, "wave=C")["wave"] is by_class["C"]
    with pytest.raises(UsageError, match="give PROMPTED=CLASS"):
        _signs(by_class, "wave=Z")


def test_cwru_fault_classes_answer_to_bearing_states_in_recording_order():
    windows = _windows(("normal", "IR007", "OR007@6", "IR014", "B021"))
    states = _states(windows)
    assert {"normal", "inner_race", "outer_race", "ball", "IR007"} <= set(states)
    inner = states["inner_race"][:, 0]
    assert inner.tolist() == np.concatenate([windows.x[2:4], windows.x[6:8]]).reshape(-1).tolist()


def test_the_follower_reacts_once_per_go_and_says_what_it_cannot_do(caplog):
    from firmware_bridge.person import Behaviour, Person
    from tinynas.service.follower import Follower

    person = Person({"fist": np.ones((1, 40, 2)) * 30}, 2, 200.0, np.int8, behaviour=Behaviour(seed=0))
    follower = Follower("http://127.0.0.1:9/status.json", "", person, None, None)
    status = {"state": "COLLECTING", "collection": {"prompt": "fist", "phase": "go", "go_at": 1.0,
                                                    "window_seconds": 0.2, "rest_class": "rest"}}
    follower.status = lambda: status
    follower.step()
    follower.step()  # the same GO: no second reaction
    assert [r["asked"] for r in person.reactions] == ["fist"]
    status["collection"] = {**status["collection"], "prompt": "wave", "go_at": 2.0}
    follower.step()
    follower.step()
    assert caplog.text.count("cannot do 'wave'") == 1 and "--signs wave=CLASS" in caplog.text
    status["collection"] = {**status["collection"], "prompt": "rest", "go_at": 3.0}
    follower.step()
    assert "cannot do 'rest'" not in caplog.text and person.reactions[-1]["made"] is None


def test_the_simulated_person_follows_the_configs_status_endpoint(tmp_path):
    from types import SimpleNamespace

    from tinynas.cli.simulate import _endpoint

    config = tmp_path / "t.toml"
    config.write_text('http_host = "0.0.0.0"\nhttp_port = 8790\nhttp_token = "a-token-of-16-chars"\n')
    follow, token = _endpoint(SimpleNamespace(config=str(config), follow=None, token=None))
    assert (follow, token) == ("http://127.0.0.1:8790/status.json", "a-token-of-16-chars")
    given = _endpoint(SimpleNamespace(config=str(config), follow="http://pi:1/status.json", token=""))
    assert given == ("http://pi:1/status.json", "")
    assert _endpoint(SimpleNamespace(config=None, follow=None, token=None)) == (
        "http://127.0.0.1:8765/status.json", "")


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n{\"state\": ",  # killed mid-body: IncompleteRead
    b"",  # killed before the status line: RemoteDisconnected
    b"garbage\r\n\r\n",  # not HTTP: BadStatusLine
])
def test_the_follower_looks_again_when_the_service_dies_mid_answer(answer):
    """A service killed while answering (as the kill tests do) must not end the simulated person: it looks again."""
    import socket
    import threading

    from firmware_bridge.person import Person
    from tinynas.service.follower import Follower

    server = socket.create_server(("127.0.0.1", 0))

    def answer_once():
        connection, _ = server.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(answer)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/status.json"
    follower = Follower(url, "", Person({}, 2, 200.0, np.int8), None, None)
    try:
        assert follower.status() == {} and follower.unreachable_since is not None
    finally:
        thread.join(5)
        server.close()


def test_follow_takes_the_page_address_a_user_copies():
    """The page's address (as shown by `tinynas service run` and the browser) means its status.json: followed as
    given, a page of HTML was read as 'not reachable yet' forever and the person never moved."""
    from types import SimpleNamespace

    from tinynas.cli.simulate import _endpoint

    def follow(url):
        return _endpoint(SimpleNamespace(config=None, follow=url, token=None))[0]

    assert follow("http://127.0.0.1:8765") == "http://127.0.0.1:8765/status.json"
    assert follow("http://pi.local:8765/") == "http://pi.local:8765/status.json"
    assert follow("http://pi:1/status.json") == "http://pi:1/status.json"
    with pytest.raises(UsageError, match="status page's address"):
        follow("pi.local:8765")


def test_the_follower_says_why_it_cannot_read_the_status_and_follows_once_it_can(caplog):
    """A real status server that comes up late, behind a token, and a server that is not tinynas's: each reason is
    said once (not once per poll), and the person follows as soon as the status can be read."""
    import http.server
    import logging
    import threading

    from firmware_bridge.person import Person
    from tinynas.service.follower import Follower
    from tinynas.service.status_server import StatusServer

    caplog.set_level(logging.INFO, logger="tinynas")
    probe = StatusServer(lambda: {"state": "IDLE"}, port=0, token="a-token-of-16-chars").start()
    port = probe.address[1]
    probe.stop()  # the port is free: the service is not up yet
    follower = Follower(f"http://127.0.0.1:{port}/status.json", "", Person({}, 2, 200.0, np.int8), None, None)
    assert follower.status() == {} and follower.status() == {}
    assert caplog.text.count("not reachable yet") == 1
    server = StatusServer(lambda: {"state": "IDLE"}, port=port, token="a-token-of-16-chars").start()
    try:
        assert follower.status() == {} and follower.status() == {}
        assert caplog.text.count("refused without the right token") == 1
        follower.url += "?token=a-token-of-16-chars"
        assert follower.status()["state"] == "IDLE"
        assert "read: following it" in caplog.text and follower.unreachable_since is None
    finally:
        server.stop()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>a page</html>")

        def log_message(self, *args):
            return

    other = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        follower.url = f"http://127.0.0.1:{other.server_address[1]}/"
        assert follower.status() == {} and follower.status() == {}
        assert caplog.text.count("not with tinynas's status") == 1
    finally:
        other.shutdown()
        other.server_close()


def test_the_follower_records_what_the_gates_one_more_step_asks_once(tmp_path):
    """The gate's "one more step" is a normal state (error empty, the outcome in `gate`), as the service's status
    shows it: the simulated person records the N more per class it asks, once per outcome (CI stop 63: the follower
    read only `error`, and the person never recorded them)."""
    from firmware_bridge.person import Person
    from firmware_bridge.plan import Plan
    from tinynas.service.follower import Follower
    from tinynas.service.gate import outcome
    from tinynas.service.paths import ServicePaths
    from tinynas.service.state import ServiceState
    from tinynas.verdict import HeldOut, deploy_gate

    plan = Plan("p", ("rest", "fist"), repetitions=5, window_seconds=1.0, rest_seconds=1.0, countdown=1,
                rest_class="rest")
    verdict = deploy_gate(HeldOut(3, 4), 0.5, 2, 0.2)
    gate = outcome(verdict, {**HeldOut(3, 4).to_dict(), "recall": [1.0, 0.5]}, plan.classes, plan, "alice", 0.2, "")
    assert gate.decision == "undecided"
    state = ServiceState(state="IDLE", user="alice", gate=gate)
    status = {**state.to_dict(), "state": "IDLE"}
    follower = Follower("http://127.0.0.1:9/status.json", "", Person({}, 2, 200.0, np.int8), tmp_path, None)
    follower.status = lambda: status
    follower.step()
    follower.step()  # the same outcome still shown: not a second time
    asked = [json.loads(path.read_text()) for path in ServicePaths(tmp_path).requests.glob("*-onboard.json")]
    assert asked == [{"kind": "onboard", "user": "alice", "more": gate.more_per_class}] and gate.more_per_class > 0
    status["gate"] = {**status["gate"], "decision": "refuse"}  # record again: a person's decision, not followed
    status["gate"]["text"] = "other"
    follower.step()
    assert len(list(ServicePaths(tmp_path).requests.glob("*-onboard.json"))) == 1
