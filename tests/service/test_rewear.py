"""The re-wear / new-condition flow (`tinynas onboard --user U --recalibrate`) in a real service process.

One onboarding (simulated front-end on a pseudo-terminal, a simulated person performing the prompts,
a real search) gives a served model; then, against that running service, the person coming back on other days
with the armband put on again (each electrode's gain changed): a request for a user without
a served model is refused in one line; a recalibration on data that contradicts itself (the first two
of three repetitions performed as the wrong signs) follows the cross-validation's rule (the best candidate, a tie
to adapt, never below the old model); a recalibration killed
with SIGKILL while fine-tuning leaves the old model serving after the restart, resumes, and is swapped
in only once accepted; one cancelled with `onboard --cancel` leaves the served model; an unlabelled
adaptation says it was judged by confidence only.
"""

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.support.service_scenario import CLASSES, PLAN_CLASSES, Scenario, worker_processes
from tinynas.service.runner import request
from tinynas.training import scratch

FINAL = ("accepted", "rejected", "failed", "cancelled")


class RewearScenario(Scenario):
    """The onboarding scenario, whose simulated person can perform the wrong sign for a few prompts."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.wrong = {}  # prompted sign -> performed sign, for the next `wrong_left` prompts
        self.wrong_left = 0
        # The flow's verdicts compare accuracies on a handful of windows: here the person makes no wrong or
        # missed sign of their own (still late now and then), only the ones this test asks for.
        self.source.behaviour = replace(self.source.behaviour, wrong_probability=0.0, miss_probability=0.0)
        react = self.source.react

        def maybe_wrong(label, *args, **kwargs):
            if self.wrong_left > 0 and label in self.wrong:
                self.wrong_left -= 1
                label = self.wrong[label]
            return react(label, *args, **kwargs)

        self.source.react = maybe_wrong
        # A target with room for a real network: the flow's verdicts compare accuracies on a handful of
        # windows, which says something only when the served model is good. On the 4 KiB STM32F030F4P6 only
        # the smallest networks fit, and whether their accuracy on 3 windows rises or falls is a coin toss.
        text = self.config.read_text()
        assert 'target = "STM32F030F4P6"' in text and "min_accuracy = 0.5" in text
        # The flow under test starts from the first search's model: the deploy gate, which on the scenario's 4
        # held-out windows asks for more recordings unless all 4 are right (tested on its own in test_deploy_gate.py
        # and through the scenario of test_service.py), is opened here, so that the model served is always the one
        # whose fine-tuning behaviour the contradiction below was calibrated on.
        # The first search only has to give a good model to start from (what the flows below change is checked on
        # the figures they report): two candidates, not the scenario's three.
        self.config.write_text(text.replace('target = "STM32F030F4P6"', 'target = "nRF52840"')
                               .replace("min_accuracy = 0.5", "min_accuracy = 0.0")
                               .replace("candidates = 3", "candidates = 2"))
        # The child cross-validates three recipes over the repetitions (fine-tuning twice per fold): a kill lands
        # while it trains, even on a fast machine.
        with open(self.config, "a") as config:
            # Three repetitions: the contradicting case performs two of them wrong. With one wrong window per
            # class, the fine-tuned network could learn those three windows by heart and keep its held-out
            # accuracy (then accepting is right); a deep winner did so in half of the fine-tuning seeds tried.
            config.write("rewear_repetitions = 3\nrewear_epochs = 30\nrewear_unlabelled_seconds = 4.0\n")
            # The flow's verdicts are checked on the model paper's recipe serves (the default before fast): fast's
            # cosine-trained winner kept 1.0 on the verify windows after fine-tuning on the wrong signs, where
            # accepting is right and the contradiction this test needs does not show.
            config.write('strategy = "paper"\n')

    def cli(self, *args):
        return subprocess.run([sys.executable, "-m", "tinynas.cli", *args, "--config", str(self.config)],
                              capture_output=True, text=True, timeout=120)

    def flow(self):
        return self.state().get("rewear") or {}

    def wait_flow_end(self, started, timeout=400):
        def ended(flow):
            return flow.get("started", 0) > started and flow.get("phase") in FINAL

        self.wait(lambda: ended(self.flow()) and self.state().get("state") == "SERVING", timeout,
                  "the re-wear flow to end")
        # status.json (what `service status` shows of a running service) is rewritten every half second
        self.wait(lambda: ended(self.status().get("rewear") or {}), 30, "the status to show the end")
        return self.flow()


def _put_on_again(person, rotation: int = 0, same_gains: bool = False) -> None:
    """Another day, the armband put on again: each electrode's gain changes (`Person.redon`), and the fit is looser
    than the first day's (the gains scaled so that none is above 1); `rotation`: turned by that many electrodes.
    Louder, the synthetic signs, whose bursts reach full scale already, clip: the guide rightly pauses the
    collection then (tested in tests/firmware_bridge), which a run here did seven times in one recording, for the
    verdicts below nothing but minutes. `same_gains`: every electrode as loud as the first day (only the rotation
    changes: a case that does not follow the person's random stream, which the recording's timing also draws from)."""
    gains = person.redon(rotation)
    person.gains = np.ones_like(gains) if same_gains else gains / gains.max()


def _child_processes(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (the recalibration child of one job)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def rewear(tmp_path_factory):
    run = RewearScenario(tmp_path_factory.mktemp("rewear"))
    notes = {}
    try:
        run.start()
        run.wait(lambda: run.status().get("state") == "IDLE", 60, "the service to come up")
        refused = run.cli("onboard", "--user", "alice", "--recalibrate")
        notes["refused_nothing_served"] = (refused.returncode, refused.stderr)
        request(run.data, "onboard", user="alice", plan=str(run.root / "plan.json"))
        run.wait(lambda: run.state().get("state") == "SERVING", 600, "alice's model to be served")
        notes["deployed0"] = run.state()["deployed"]

        # (3) another user has no served model: refused by the command, and by the service if asked directly.
        refused = run.cli("onboard", "--user", "bob", "--recalibrate")
        notes["refused_cli"] = (refused.returncode, refused.stdout, refused.stderr)
        request(run.data, "recalibrate", user="bob")
        run.wait(lambda: "recalibration of bob refused" in run.state().get("error", ""), 30, "bob's refusal")
        notes["refused_service"] = run.state()

        # (1b) another day, the armband put on again (every electrode's gain changes: what the flow is for);
        # contradicting data: the first two repetitions (fine-tuning) performed as the wrong signs; the last
        # (held out to verify) right.
        _put_on_again(run.source)
        run.wrong, run.wrong_left = dict(zip(CLASSES, CLASSES[1:] + CLASSES[:1])), 2 * len(CLASSES)
        started = run.state()["updated"]
        asked = run.cli("onboard", "--user", "alice", "--recalibrate")
        notes["asked"] = (asked.returncode, asked.stdout, asked.stderr)
        notes["rejected"] = run.wait_flow_end(started)
        notes["deployed_after_rejection"] = run.state()["deployed"]
        notes["status_text_rejected"] = run.cli("service", "status").stdout

        # (2) kill -9 while the child fine-tunes; (1a) the resumed recalibration on good data, on another day
        # again, the band put on turned by two of its four electrodes: the first sign's muscles now sit under the
        # electrodes the third's were under, and the other way round, so the model served takes each for the other
        # (confidently wrong on two of three signs) and any candidate that learnt today's windows is better on more
        # of them than the onboarding's 4 test windows can weigh against it. Gains as the first day's: the case must
        # not follow the person's random stream. Milder cases were verdicts on a window or two of 12: a gain change
        # alone (the served model as right as the candidates; a loaded CI run rejected it, 9 of 12 against its
        # own), and a turn by one electrode with gains drawn (the served model kept 7 of 12; a CI-loaded run's
        # candidates learnt 6 and it was rightly rejected).
        _put_on_again(run.source, rotation=2, same_gains=True)
        started = run.state()["updated"]
        assert run.cli("onboard", "--user", "alice", "--recalibrate").returncode == 0
        # While the user records again, no search workers (nor their launcher) are started: nothing uses them.
        run.wait(lambda: run.state().get("state") == "COLLECTING", 60, "the re-wear recording")
        notes["workers_while_rewear_recording"] = set()
        while run.state().get("state") == "COLLECTING" and run.process.poll() is None:
            notes["workers_while_rewear_recording"].add(worker_processes(run.process.pid))
            time.sleep(0.5)
        run.wait(lambda: run.state().get("state") == "RECALIBRATING", 300, "the recalibration to start")
        staging = run.flow()["staging"]
        run.wait(lambda: _child_processes(staging), 60, "the fine-tuning child")
        killed_child = _child_processes(staging)
        run.wait(lambda: all(scratch.folders_of(pid) for pid in killed_child), 60, "the child's temporary folder")
        run.kill()
        notes["killed_state"] = run.state()
        deadline = time.monotonic() + 30 * run.slowdown  # run.wait would stop at once: the service is dead
        while _child_processes(staging) and time.monotonic() < deadline:
            time.sleep(0.1)
        notes["orphans"] = _child_processes(staging)
        run.start()
        run.wait(lambda: run.status().get("state") == "RECALIBRATING" and run.status().get("predictions")
                 and run.status().get("pid") == run.process.pid, 120, "serving while recalibrating after restart")
        notes["status_while_recalibrating"] = run.status()
        # The child died with the service, its temporary folder with it unremoved: the new start removed it.
        notes["killed_child_folders"] = [folder for pid in killed_child for folder in scratch.folders_of(pid)]
        notes["status_text_recalibrating"] = run.cli("service", "status").stdout
        notes["accepted"] = run.wait_flow_end(started)
        notes["deployed_after_acceptance"] = run.state()["deployed"]
        notes["status_text_accepted"] = run.cli("service", "status").stdout

        # `onboard --cancel` while the child fine-tunes: stopped, nothing swapped.
        started = run.state()["updated"]
        assert run.cli("onboard", "--user", "alice", "--recalibrate").returncode == 0
        run.wait(lambda: run.state().get("state") == "RECALIBRATING", 300, "the recalibration to start")
        staging = run.flow()["staging"]
        run.wait(lambda: _child_processes(staging), 60, "the fine-tuning child")
        child = _child_processes(staging)
        run.wait(lambda: all(scratch.folders_of(pid) for pid in child), 60, "the child's temporary folder")
        notes["cancel"] = run.cli("onboard", "--user", "alice", "--cancel").returncode
        notes["cancelled"] = run.wait_flow_end(started)
        notes["cancelled_child_folders"] = [folder for pid in child for folder in scratch.folders_of(pid)]
        notes["deployed_after_cancel"] = run.state()["deployed"]

        # Unlabelled: a few seconds of whatever the device streams, then adapt.
        started = run.state()["updated"]
        assert run.cli("onboard", "--user", "alice", "--recalibrate", "--unlabelled").returncode == 0
        notes["unlabelled"] = run.wait_flow_end(started)
        notes["deployed_after_unlabelled"] = run.state()["deployed"]
        yield run, notes
    finally:
        run.close()


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tinynas: error: ")
    return lines[0]


@pytest.mark.slow
def test_refused_without_a_served_model(rewear):
    _, notes = rewear
    code, stderr = notes["refused_nothing_served"]
    assert code == 2 and "alice has no served model" in _one_line_error(stderr)
    code, stdout, stderr = notes["refused_cli"]
    assert code == 2 and "bob has no served model" in _one_line_error(stderr) and "alice" in stderr
    state = notes["refused_service"]
    assert state["state"] == "SERVING" and state["deployed"] == notes["deployed0"]
    assert "\n" not in state["error"]


@pytest.mark.slow
def test_served_model_folder_can_be_recalibrated(rewear):
    from tinynas.deploy.modeldir import ModelDir

    _, notes = rewear
    folder = Path(notes["deployed0"]["model"]).parent
    model = ModelDir.open(folder)
    assert model.has_training_data and len(model.split["test"])
    assert notes["deployed0"]["plan"]["classes"] == list(PLAN_CLASSES)


@pytest.mark.slow
def test_contradicting_data_is_not_swapped_in(rewear):
    _, notes = rewear
    assert notes["asked"][0] == 0, notes["asked"]
    flow = notes["rejected"]
    assert flow["mode"] == "labelled"
    # The repetitions disagree (two performed as the wrong signs, one right): which recipe predicts the held-out
    # repetitions' labels best is close to a coin toss (fine-tuning on one wrong and one right repetition, adapt on
    # none; a CI run saw mixed statistics win 0.51 to 0.50). What the product promises is the rule, checked on the
    # figures it reports: the candidate with the most held-out windows right, a tie going to adapt; a fine-tuned
    # model only when it beat adapt there; and nothing swapped in that scored below the old model.
    figures = flow["figures"]
    compared, chosen = figures["compared"], figures["chosen"]
    candidates = {name: value for name, value in compared.items() if name != "old model"}
    assert set(candidates) == {"adapt", "fine-tune", "fine-tune, mixed statistics"}, compared
    assert compared[chosen] == max(candidates.values()), flow
    assert chosen == "adapt" or compared[chosen] > compared["adapt"], flow
    if flow["phase"] == "rejected":
        assert "The old model stays" in flow["text"] and "rejected" in notes["status_text_rejected"]
        assert notes["deployed_after_rejection"] == notes["deployed0"]
        assert not Path(flow["final"]).exists()
    else:
        assert flow["phase"] == "accepted" and _not_worse(figures["paired"]), flow
        card = json.loads(Path(notes["deployed_after_rejection"]["card"]).read_text())
        assert card["history"][-1]["chosen"] == chosen
        assert (card["history"][-1]["recipe"] is None) == (chosen == "adapt")
    assert not Path(flow["staging"]).exists()


@pytest.mark.slow
def test_no_search_workers_start_while_the_user_records_again(rewear):
    _, notes = rewear
    assert notes["workers_while_rewear_recording"] == {(0, 0)}


@pytest.mark.slow
def test_kill_mid_recalibration_keeps_the_old_model_serving(rewear):
    _, notes = rewear
    assert not notes["orphans"], "the fine-tuning child outlived the killed service"
    assert not notes["killed_child_folders"]
    killed = notes["killed_state"]
    assert killed["state"] == "RECALIBRATING" and killed["rewear"]["phase"] == "recalibrating"
    assert killed["deployed"] == notes["deployed_after_rejection"]
    live = notes["status_while_recalibrating"]
    assert live["deployed"]["model"] == notes["deployed_after_rejection"]["model"]  # the model served before the kill
    assert live["predictions"] and all(p["label"] in PLAN_CLASSES + ("unknown",) for p in live["predictions"])
    assert "re-wear of alice (labelled): recalibrating" in notes["status_text_recalibrating"]


def _not_worse(paired: dict) -> bool:
    """The paired counts a recalibration was accepted on: better on at least as many windows as worse."""
    better = sum(part["better"] for part in paired.values())
    return better >= sum(part["worse"] for part in paired.values())  # paired holds only paired counts


@pytest.mark.slow
def test_accepted_recalibration_is_swapped_in(rewear):
    _, notes = rewear
    flow, deployed = notes["accepted"], notes["deployed_after_acceptance"]
    assert flow["phase"] == "accepted", flow
    assert "today's wear" in flow["text"] and "onboarding test" in flow["text"] and "->" in flow["text"]
    before, after = flow["figures"]["verify"]
    # Accepted on the rule of `recalibrate.decide`: over today's and the onboarding's windows together, better on at
    # least as many as worse (today's accuracy alone may drop a window while the onboarding's gains more).
    assert _not_worse(flow["figures"]["paired"]), flow["figures"]
    # What is served says what its accuracy was measured on: today's signs, each repetition held out once by the
    # cross-validation over the repetitions (float), answered along today's stream as serving answers, with their
    # count and interval.
    checked = deployed["held_out"]
    assert checked["measure"] == "float, cross-validated over the new repetitions, on today's stream as serving answers"
    assert checked["hits"] / checked["windows"] == pytest.approx(after, abs=1e-3) and checked["windows"] >= 8
    assert "signs of today's wear, float, cross-validated" in notes["status_text_accepted"]
    assert deployed["model"] == str(Path(flow["final"]) / "model.tflite") and Path(deployed["model"]).exists()
    assert (deployed["replaced"] == notes["deployed_after_rejection"]["model"]
            and deployed["changed_by"] == "recalibrate")
    card = json.loads(Path(deployed["card"]).read_text())
    assert card["history"][-1]["kind"] == "recalibrate"
    assert not Path(flow["staging"]).exists()
    assert not [p for p in Path(flow["final"]).parent.iterdir() if p.name.endswith((".tmp", ".json", ".log"))]
    assert "accepted" in notes["status_text_accepted"]


@pytest.mark.slow
def test_unlabelled_adaptation_says_how_it_was_judged(rewear):
    _, notes = rewear
    flow, deployed = notes["unlabelled"], notes["deployed_after_unlabelled"]
    assert flow["mode"] == "unlabelled" and flow["phase"] in ("accepted", "rejected"), flow
    assert "confidence is not accuracy" in flow["text"]
    before, after = flow["figures"]["confidence"]
    if flow["phase"] == "accepted":
        assert after >= before and deployed["changed_by"] == "adapt"
        assert deployed["model"] == str(Path(flow["final"]) / "model.tflite")
    else:
        assert after < before and deployed == notes["deployed_after_acceptance"]


@pytest.mark.slow
def test_cancel_mid_recalibration_keeps_the_served_model(rewear):
    _, notes = rewear
    assert notes["cancel"] == 0
    assert not notes["cancelled_child_folders"]  # the killed child's temporary files went with it
    flow = notes["cancelled"]
    assert flow["phase"] == "cancelled" and "the old model stays" in flow["text"], flow
    assert notes["deployed_after_cancel"] == notes["deployed_after_acceptance"]
    assert not Path(flow["staging"]).exists() and not Path(flow["final"]).exists()


def test_cli_refuses_without_a_served_model_in_one_line(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "onboard", "--user", "bob", "--recalibrate",
                          "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "bob has no served model" in _one_line_error(run.stderr)
    assert not (tmp_path / "data" / "requests").exists()  # nothing left for a service to act on
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "onboard", "--user", "bob", "--unlabelled",
                          "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--unlabelled goes with --recalibrate" in _one_line_error(run.stderr)


def test_state_with_a_recalibration_is_checked(tmp_path):
    from tinynas.service.state import DamagedState, Deployed, RewearFlow, ServiceState, _parse, load_state, save_state

    deployed = Deployed(user="alice", model="/m/model.tflite", card="/m/card.json", accuracy=1.0)
    flow = RewearFlow(user="alice", mode="labelled", phase="recalibrating", session="/s", staging="/d/x.tmp",
                      final="/d/x", source="/m/model.tflite", window=200, started=1.7e9,
                      plan={"classes": ["rest", "fist"], "repetitions": 3}, figures={"verify": [0.5, 0.75]})
    good = ServiceState(state="RECALIBRATING", user="alice", session="/s", deployed=deployed, rewear=flow)
    save_state(tmp_path / "state.json", good)
    assert load_state(tmp_path / "state.json").rewear == flow
    saved = json.loads((tmp_path / "state.json").read_text())["rewear"]
    assert saved["from"] == "/m/model.tflite" and "source" not in saved and "finished" not in saved  # as ever
    assert ServiceState().to_dict()["rewear"] == {}  # no flow: what state files have always held
    without_from = {key: value for key, value in saved.items() if key != "from"}
    for broken in ({**good.to_dict(), "deployed": {}}, {**good.to_dict(), "rewear": {}},
                   {**good.to_dict(), "rewear": ["phase"]}, {**good.to_dict(), "rewear": without_from},
                   {**good.to_dict(), "rewear": {**saved, "window": "200"}}):
        with pytest.raises(DamagedState):
            _parse(json.dumps(broken))
    # A flow that is over is only shown: its damaged record is dropped, the served model stays.
    serving = {**good.to_dict(), "state": "SERVING", "session": "", "rewear": {**without_from, "phase": "accepted"}}
    assert _parse(json.dumps(serving)).rewear is None and _parse(json.dumps(serving)).deployed == deployed


def test_onboarding_plan_of_an_older_deployment_comes_from_its_session(tmp_path):
    from tinynas.service.rewear_request import RewearRefused, onboarding_plan
    from tinynas.service.state import Deployed

    session = tmp_path / "profiles" / "alice" / "sessions" / "20260101-000000"
    session.mkdir(parents=True)
    (session / "manifest.json").write_text(json.dumps({"format": "tinynas-session", "sample_rate_hz": 200.0,
                                                       "channels": 8,
                                                       "plan": {"name": "p", "classes": ["a", "b"],
                                                                "repetitions": 6}}))
    study = tmp_path / "profiles" / "alice" / "studies" / "20260101-000000"
    plan = onboarding_plan(Deployed("alice", "/m/model.tflite", "/m/card.json", study=str(study)), 2)
    assert plan.classes == ("a", "b") and plan.repetitions == 2
    with pytest.raises(RewearRefused, match="plan is not known"):
        onboarding_plan(Deployed("alice", "/m/model.tflite", "/m/card.json",
                                 study=str(tmp_path / "gone" / "studies" / "x")), 2)


def test_status_line_names_the_phase_once():
    from tinynas.service.rewear import status_line

    assert status_line({}) == ""
    line = status_line({"user": "alice", "mode": "labelled", "phase": "rejected",
                        "text": "rejected: less accurate on held-out new windows. The old model stays."})
    assert line == "re-wear of alice (labelled): rejected: less accurate on held-out new windows. The old model stays."
    assert status_line({"user": "a", "mode": "unlabelled", "phase": "adapting", "text": "adapting x"}) \
        == "re-wear of a (unlabelled): adapting x"
    assert status_line({"user": "a", "mode": "labelled", "phase": "collecting", "text": "2 of 6"}) \
        == "re-wear of a (labelled): collecting: 2 of 6"


def _record_unlabelled(tmp_path, chunks, slow_first_chunk=False, started_by=None, whole=True):
    """`record_unlabelled` of 1 s (200 samples) on a real `Recorder` fed by a thread, a 16-sample chunk for each first
    device sample in `chunks` (from the `started_by`-th on, once the recording has started); the session's windows
    and the recorder's gaps."""
    import threading

    import numpy as np

    from firmware_bridge.protocol import Samples
    from firmware_bridge.recorder import Recorder
    from tests.support.service_context import service_context
    from tinynas.service.rewear_recording import record_unlabelled
    from tinynas.service.state import RewearFlow

    context = service_context(tmp_path)
    hello = context.require_device().hello
    session = tmp_path / "session"
    recorder = Recorder(session, hello)
    if slow_first_chunk:
        add, delayed = recorder.ring.add, []

        def slow_first(message):
            if not delayed:
                delayed.append(message)
                time.sleep(0.3)
            add(message)

        recorder.ring.add = slow_first
    stop = threading.Event()

    def device():
        for number, first in enumerate(chunks):
            while number == started_by and context.collection.plan != "unlabelled" and not stop.is_set():
                time.sleep(0.005)
            if stop.is_set():
                return
            recorder.add_samples(Samples(first, np.zeros((16, hello.channels), np.int8)))
            time.sleep(0.002)

    feeder = threading.Thread(target=device, daemon=True)
    feeder.start()
    flow = RewearFlow(user="alice", mode="unlabelled", phase="collecting", session=str(session),
                      staging=str(tmp_path / "staging"), final=str(tmp_path / "final"), source="", window=50,
                      started=0.0, seconds=1.0)
    # A recording that does not end is stopped as the service would stop it, and fails the test (no hang).
    timer = threading.Timer(60, context.stopping.set)
    timer.start()
    try:
        record_unlabelled(context, flow, recorder)
    except KeyboardInterrupt:
        raise AssertionError("the unlabelled recording did not end") from None
    finally:
        timer.cancel()
        stop.set()
        feeder.join(10)
        recorder.close()
    windows = [json.loads(line) for line in (session / "windows.jsonl").read_text().splitlines()]
    assert [w["label"] for w in windows] == ["unlabelled-a", "unlabelled-b"]
    assert sum(w["length"] for w in windows) == 200
    if whole:
        assert all("crc32" in w for w in windows)  # cut from samples received: on disk as they were in memory
    return windows, recorder.gaps


def test_unlabelled_recording_starts_at_the_device_s_samples(tmp_path):
    # The recorder counted a chunk as written a moment before its live ring held it (its thread between the two).
    # A run of the journey read the recording's start in that moment: 0, the empty ring's, where the device's
    # counter stood at 51,728; the 6 s it labelled were none of the session's and the adaptation failed. Here
    # the ring takes its time with the first chunk, so that that moment is long.
    windows, _ = _record_unlabelled(tmp_path, range(51_728, 51_728 + 16 * 400, 16), slow_first_chunk=True)
    assert windows[0]["start"] >= 51_728


def test_unlabelled_recording_starts_again_after_a_gap(tmp_path):
    # A device unplugged (it restarts, counting from 0 again) and a chunk lost on the link, each in the middle of
    # the recording: windows over them would hold samples that never came, and the adaptation had nothing whole.
    chunks = [*range(51_728, 51_728 + 16 * 5, 16), *range(0, 16 * 8, 16), *range(16 * 9, 16 * 400, 16)]
    windows, gaps = _record_unlabelled(tmp_path, chunks, started_by=3)
    assert len(gaps) == 2
    start, end = windows[0]["start"], windows[-1]["start"] + windows[-1]["length"]
    assert all(gap_end <= start or end <= gap_start for gap_start, gap_end in gaps), (windows, gaps)


def test_unlabelled_recording_on_a_link_that_keeps_dropping_ends(tmp_path):
    # A chunk lost in every four: no attempt is whole. After its attempts the recording is left to the
    # adaptation as it is (which uses the windows that are whole, or fails in one line), never recorded again
    # without end.
    from tinynas.service.rewear_recording import UNLABELLED_ATTEMPTS

    chunks = [51_728 + 16 * number for number in range(5000) if number < 3 or number % 4]
    windows, gaps = _record_unlabelled(tmp_path, chunks, started_by=3, whole=False)
    assert len(gaps) >= UNLABELLED_ATTEMPTS and not all("crc32" in w for w in windows)
