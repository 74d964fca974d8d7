"""The device service end to end, as a real process, killed with SIGKILL in every phase.

A simulated front-end streams over a real pseudo-terminal; the product's simulated person
(`tinynas simulate --person`: firmware_bridge/person.py, followed through the status endpoint by
tinynas/service/follower.py) reacts to each GO as people do: late now and then, sometimes with the wrong
sign or none, resting still with sensor noise. Scenario: onboard -> (the stream reader killed once;
the device replugged, restarting its counter) -> (kill while collecting, restart) -> (kill while
searching, restart) -> deploy -> serve -> (kill while serving, restart) -> serve; then the person
rests, and performs signs of known classes, and the live predictions are checked against both.
"""

import json
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.support.service_scenario import (
    CLASSES,
    GESTURE_SAMPLES,
    PLAN_CLASSES,
    RATE,
    REPETITIONS,
    WINDOW_SAMPLES,
    Scenario,
    worker_processes,
)
from tinynas.service.runner import request


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    run = Scenario(tmp_path_factory.mktemp("service"))
    notes = {}
    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        request(run.data, "onboard", user="alice", plan=str(run.root / "plan.json"))
        run.wait(lambda: len(run.windows_accepted()) >= 3, 120, "three accepted windows")
        notes["reader_health"] = (run.live_status().get("threads") or {}).get("read_stream")
        # A USB-powered front-end replugged: it restarts, counting its samples from 0 again.
        from tinynas.data.session import load_session

        notes["windows_before_replug"] = load_session(run.session()).x
        run.simulator.unplug(1.0)
        accepted = len(run.windows_accepted())
        run.wait(lambda: len(run.windows_accepted()) >= accepted + 2, 120, "two windows after the replug")
        notes["link_after_replug"] = run.live_status().get("link") or {}
        notes["before_kill_collecting"] = run.windows_accepted()
        # Warm while the person records: counted once both run, or when the collection ended first (a loaded
        # machine starts TensorFlow slowly; the wait follows the collection, not a clock).
        run.wait(lambda: worker_processes(run.process.pid)[1] >= 2 or run.status().get("state") != "COLLECTING",
                 300, "the workers to be warm, or the collection to end")
        notes["workers_while_collecting"] = worker_processes(run.process.pid)[1]
        notes["state_when_workers_counted"] = run.status().get("state")
        run.kill()
        notes["killed_in"] = [run.state()["state"]]
        run.start()
        run.wait(lambda: len([t for t in run.trials() if t[1] == "complete"]) >= 2, 300, "two trained candidates")
        notes["trials_before_kill"] = run.trials()
        notes["session_windows"] = run.windows_accepted()
        run.kill()
        notes["killed_in"].append(run.state()["state"])
        run.start()
        run.wait(lambda: run.state().get("state") == "SERVING", 400, "serving")
        notes["deployed"] = run.state()["deployed"]
        notes["trials_after"] = run.trials()
        run.wait(lambda: worker_processes(run.process.pid) == (0, 0), 30,
                 "the workers and their launcher to stop once serving")
        run.wait(lambda: len(run.status().get("predictions") or []) >= 3, 60, "predictions")
        notes["http_status"] = json.loads(urllib.request.urlopen(
            f"http://127.0.0.1:{run.http_port}/status.json", timeout=5).read())
        run.kill()
        notes["killed_in"].append(run.state()["state"])
        run.start()
        run.wait(lambda: run.status().get("state") == "SERVING" and run.status().get("predictions"), 60,
                 "serving again after the restart")
        notes["deployed_after_restart"] = run.state()["deployed"]
        # Replay known classes and read the predictions made on them. The device restarted at the replug, so
        # its sample counter (what predictions are indexed by) runs behind the samples the source has played.
        offset = min(run.source.samples_read - run.simulator.sample_index
                     for _ in range(50) if time.sleep(0.002) is None)
        # First the person sits still: idle must be answered as rest (or unknown), not as a sign.
        first_idle = run.source.samples_read - offset
        # At least 8 s still, and until the service answered 24 windows that lie wholly in the stillness: on a
        # loaded machine serving runs behind, and the test waits for its answers, not for a clock.
        still_since = time.monotonic()

        def answered_still() -> int:
            path = run.data / "predictions.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            ends = []
            for line in lines:
                try:
                    ends.append(json.loads(line)["end_sample"])
                except (ValueError, KeyError):  # the line being written
                    continue
            return sum(1 for end in ends if end >= first_idle + WINDOW_SAMPLES)

        run.wait(lambda: time.monotonic() - still_since >= 8.0 and answered_still() >= 24, 300,
                 "24 answers while the person sat still")
        notes["idle"] = (first_idle, run.source.samples_read - offset)
        start_played = len(run.source.played)
        for label in CLASSES * 2:
            run.source.perform(label, 1.0, 8 * GESTURE_SAMPLES / RATE)
        total = sum(200 + 8 * GESTURE_SAMPLES for _ in CLASSES * 2)
        end = run.source.samples_read - offset + total

        def predictions():
            path = run.data / "predictions.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]

        # Until the service has classified past the last performed sample, however slow the machine.
        run.wait(lambda: any(p["end_sample"] >= end for p in predictions()), 60 + total / 200,
                 "predictions past the replayed gestures")
        notes["played"] = [(label, first - offset, count) for label, first, count in run.source.played[start_played:]]
        notes["predictions"] = predictions()
        notes["window_samples"] = 200
        notes["reactions"] = list(run.source.reactions)
        yield run, notes
    finally:
        run.close()


@pytest.mark.slow
def test_kills_hit_every_phase(scenario):
    _, notes = scenario
    assert notes["killed_in"] == ["COLLECTING", "SEARCHING", "SERVING"]


@pytest.mark.slow
def test_workers_are_warm_while_the_user_records(scenario):
    """TensorFlow's import is done while the user records, not after: the configured workers run already."""
    _, notes = scenario
    assert notes["workers_while_collecting"] == 2 and notes["state_when_workers_counted"] == "COLLECTING"


@pytest.mark.slow
def test_no_accepted_window_is_lost(scenario):
    run, notes = scenario
    final = run.windows_accepted()
    assert final[:len(notes["before_kill_collecting"])] == notes["before_kill_collecting"]
    # The plan's repetitions, and any the deploy gate asked for and the person recorded (`onboard --more`).
    person = [json.loads(line) for line in (run.root / "person.jsonl").read_text().splitlines()]
    more = sum(event.get("more", 0) for event in person)
    assert len(final) == len(PLAN_CLASSES) * (REPETITIONS + more)


@pytest.mark.slow
def test_the_stream_reader_killed_mid_collection_recovers_without_a_restart(scenario):
    _, notes = scenario
    assert notes["reader_health"]["restarts"] == 1 and "InjectedFault" in notes["reader_health"]["last_error"]


@pytest.mark.slow
def test_a_replug_that_restarts_the_device_changes_no_accepted_window(scenario):
    """Checked byte for byte: the windows accepted before the replug read back as they were accepted."""
    run, notes = scenario
    from tinynas.data.session import load_session

    assert notes["link_after_replug"]["resets"] >= 1
    after = load_session(run.session())
    before = notes["windows_before_replug"]
    assert after.provenance["changed_windows"] == 0
    assert np.array_equal(after.x[:len(before)], before)


@pytest.mark.slow
def test_completed_trials_are_not_retrained(scenario):
    _, notes = scenario
    after = {number: (state, attempts) for number, state, attempts in notes["trials_after"]}
    for number, state, _attempts in notes["trials_before_kill"]:
        if state == "complete":
            assert after[number] == ("complete", 1)


@pytest.mark.slow
def test_only_a_verified_model_is_served(scenario):
    run, notes = scenario
    deployed = notes["deployed"]
    assert deployed["accuracy"] >= 0.5 and Path(deployed["model"]).exists()
    assert "/deployed/" in deployed["model"] and not deployed["model"].endswith(".tmp")
    assert notes["deployed_after_restart"] == deployed


@pytest.mark.slow
def test_status_endpoint_schema(scenario):
    _, notes = scenario
    status = notes["http_status"]
    assert {"state", "user", "error", "time", "deployed", "collection", "search", "predictions", "link",
            "memory", "pid"} <= set(status)
    assert status["state"] == "SERVING" and status["user"] == "alice"
    assert isinstance(status["predictions"], list) and status["predictions"]
    prediction = status["predictions"][-1]
    assert set(prediction) == {"time", "at", "end_sample", "label", "confidence", "smoothed", "probabilities", "why"}
    assert abs(prediction["time"] - status["time"]) < 600 and prediction["at"][:4].isdigit()  # wall-clock, local ISO
    assert prediction["label"] in PLAN_CLASSES + ("unknown",) and 0 <= prediction["confidence"] <= 1
    assert len(prediction["probabilities"]) == len(PLAN_CLASSES)
    assert abs(sum(prediction["probabilities"]) - 1) < 0.01
    assert max(prediction["probabilities"]) == pytest.approx(prediction["confidence"], abs=1e-3)


@pytest.mark.slow  # the scenario's real service: in the slow tier with its other tests
def test_the_status_page_gets_what_it_draws_from_the_real_service(scenario):
    run, _ = scenario
    seen = run.page_seen
    assert {"COLLECTING", "SEARCHING", "SERVING"} <= set(seen), sorted(seen)
    collecting = seen["COLLECTING"]["collection"]
    channels = collecting["trace"]["channels"]
    assert len(channels) == 4 == len(collecting["rest"])  # the simulated armband's 4 channels
    assert all(len(c["min"]) == len(c["max"]) >= 20 and c["flag"] in ("", "flat", "clipping") for c in channels)
    assert set(collecting["per_class"]) == set(PLAN_CLASSES)
    assert collecting["phase"] in ("ready", "go", "kept", "not kept")
    searching = seen["SEARCHING"]["search"]
    assert searching["ram_budget_bytes"] == 4096 and searching["budget_seconds"] > 0  # STM32F030F4P6
    assert all(t["name"].startswith("A(") and t["ram_bytes"] > 0 for t in searching["trials_list"])
    serving = seen["SERVING"]
    assert serving["model"]["name"].startswith("A(") and serving["model"]["flash_bytes"] > 0
    assert set(serving["classes"]) == set(PLAN_CLASSES) and serving["predictions_per_minute"] > 0
    # Searched to keep the hop at the 48 MHz chip's clock (issue 66), and what that cost the search said beside it.
    timed = serving["model"]["time"]
    assert timed["keeps_hop"] and "searched to keep 250 ms per inference" in timed["words"], timed
    assert "architectures its RAM, flash and MAC budgets allow" in timed["words"], timed


@pytest.mark.slow
def test_live_predictions_match_the_performed_classes(scenario):
    _, notes = scenario
    length = notes["window_samples"]
    performances = []  # back-to-back repetitions of one gesture make one performance
    for label, first, count in notes["played"]:
        if performances and performances[-1][0] == label and performances[-1][1] + performances[-1][2] == first:
            performances[-1] = (label, performances[-1][1], performances[-1][2] + count)
        else:
            performances.append((label, first, count))
    judged = []
    for prediction in notes["predictions"]:
        start, end = prediction["end_sample"] - length, prediction["end_sample"]
        for label, first, count in performances:
            if first <= start and end <= first + count:
                judged.append(prediction["label"] == label)
    assert len(judged) >= 36, "too few predictions fell inside performed gestures"
    accuracy = float(np.mean(judged))
    expected = notes["deployed"]["accuracy"]
    print(f"live accuracy {accuracy:.3f} on {len(judged)} windows; held-out accuracy {expected:.3f}")
    # Against chance (1/3), not against the held-out figure: that one comes from the few test windows of
    # an 18-window collection (1.0 or 0.67 seen), far noisier than 0.25. Live windows overlap (hop 50 of
    # 200 samples), so 72 of them are ~18 independent ones: P(>= 0.55 | chance) is about 0.03.
    assert accuracy >= 0.55


@pytest.mark.slow
def test_an_idle_arm_is_answered_as_rest_or_unknown(scenario):
    """Live, the person sitting still for 8 s: at least 90 % of the predictions on those windows say rest or
    unknown (an idle arm was "fist" in 155 of 247 predictions before serving knew idle)."""
    _, notes = scenario
    first, last = notes["idle"]
    length = notes["window_samples"]
    idle = [p for p in notes["predictions"] if first + length <= p["end_sample"] <= last]
    assert len(idle) >= 20, "too few predictions while the person sat still"
    share = np.mean([p["label"] in ("rest", "unknown") for p in idle])
    print(f"idle answered as rest/unknown in {share:.1%} of {len(idle)} windows")
    assert share >= 0.9
    deployed = notes["deployed"]["serving"]
    assert deployed["still_label"] == "rest" and deployed["still_rms"] > 0
    assert "validation" in deployed["calibrated_on"] or "out-of-fold" in deployed["calibrated_on"]


@pytest.mark.slow
def test_the_person_was_realistic_and_pauses_came_only_from_what_they_did(scenario):
    run, notes = scenario
    reactions = notes["reactions"]
    assert any(r["reaction_seconds"] >= 0.7 for r in reactions), "no late start: the person was too perfect"
    # A pause needs three rejected attempts at one prompt: only three missed (or wrong) signs in a row do that.
    failures = [r["made"] != r["asked"] and r["asked"] != "rest" for r in reactions]
    triples = sum(all(failures[i:i + 3]) for i in range(len(failures) - 2))
    assert run.pauses <= triples
