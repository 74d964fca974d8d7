"""One flow at a time, through the real service with the simulated person (issue 68): while alice's guided collection
runs, a second onboarding is refused in one line saying what runs and how to cancel it (by the command, and by the
service for a request left directly), never queued; `onboard --cancel` stops the running collection at once, keeps
every window accepted so far, and the service rests again (IDLE: nothing was served before)."""

import json
import subprocess
import sys

import pytest

from tests.support.service_scenario import Scenario
from tinynas.service.runner import request


@pytest.mark.slow
def test_a_running_collection_refuses_a_second_onboarding_and_stops_at_once_on_cancel(tmp_path):
    run = Scenario(tmp_path)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tinynas.cli", *args, "--config", str(run.config)],
                              capture_output=True, text=True, timeout=120)

    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        request(run.data, "onboard", user="alice", plan=str(run.root / "plan.json"))
        run.wait(lambda: len(run.windows_accepted()) >= 3, 120, "alice's third window")

        refused = cli("onboard", "--user", "bob")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("tinynas: error: onboarding of bob refused: alice's collection runs now; "
                                         "cancel it with `tinynas onboard --user alice --cancel --config "), \
            refused.stderr
        request(run.data, "onboard", user="bob")  # left directly (not through the command): refused by the service
        run.wait(lambda: "onboarding of bob refused: alice's collection runs now" in run.state().get("error", ""),
                 30, "the service's refusal")
        assert not list((run.data / "requests").glob("*-onboard.json"))  # nothing kept to start later

        session = run.session()
        before = len(run.windows_accepted())
        assert cli("onboard", "--user", "alice", "--cancel").returncode == 0
        run.wait(lambda: run.state().get("state") == "IDLE", 20, "the collection to stop")
        state = run.state()
        kept = [json.loads(line) for line in (session / "windows.jsonl").read_text().splitlines()]
        assert len(kept) >= before and len(kept) < 20  # nothing accepted is lost; stopped before its end
        assert f"collection of alice cancelled; its recordings are kept in {session}" == state["error"]
        assert not state["paused"] and not state["session"] and not state["deployed"]
        # Bob's refused onboarding does not start by itself once alice's flow is over.
        run.wait(lambda: run.status().get("state") == "IDLE" and run.status().get("error") == state["error"], 10,
                 "the page to show the cancel")
        assert not (run.data / "profiles" / "bob").exists() and run.state()["state"] == "IDLE"
    finally:
        run.close()


def test_the_pages_onboard_button_is_refused_alike_while_a_search_runs(tmp_path):
    from tinynas.errors import UsageError
    from tinynas.service.actions import from_page
    from tinynas.service.config import ServiceConfig
    from tinynas.service.state import ServiceState, save_state

    config = ServiceConfig(data_dir=str(tmp_path), budget="10m")
    save_state(tmp_path / "state.json", ServiceState(state="SEARCHING", user="alice", study=str(tmp_path / "s")))
    with pytest.raises(UsageError, match="onboarding of bob refused: the search for alice's model is under way .*"
                                         "a search cannot be cancelled: it ends within its budget \\(10m\\)"):
        from_page(config, "onboard", {"user": "bob"})
    assert not (tmp_path / "requests").exists()
