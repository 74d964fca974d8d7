"""An anomaly search whose two finalists tie at the alarm's operating point: the cheaper classical scorer is chosen,
and it is what the folder exports, evaluates, bundles and adapts (issue 59)."""

import io
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tests.support.anomaly_machine import LENGTH, RATE, RECIPE, TARGET, Results, machine, only
from tinynas.anomaly.classical_c import SCORE_TOLERANCE, host_scores
from tinynas.anomaly.evaluation import evaluate_scorer
from tinynas.anomaly.scoring import served_scores
from tinynas.anomaly.section import read_section
from tinynas.cost.targets import resolve_target
from tinynas.study import Study

# Its module fixture runs a real search: the slow tier, so that the fast tier runs none (issue 69).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    out = tmp_path_factory.mktemp("family")
    progress = Results()
    result = Study(out, only(machine(seed=11), [0]), resolve_target(**TARGET), strategy="random", budget_seconds=25,
                   fidelity=RECIPE, final_fidelity=RECIPE, task="anomaly", false_alarm_rate=RATE, seed=0,
                   progress=progress, clock=lambda: 10.0 * progress.results, runtime="tflm",
                   accounting="arena").run()
    return out, result


def test_a_tie_goes_to_the_cheaper_classical_scorer_and_the_card_says_why(chosen):
    out, _ = chosen
    card = json.loads((out / "card.json").read_text())
    choice = card["anomaly"]["family_choice"]
    network, classical = choice["finalists"]
    # This machine's faults are as visible to the features as to the network: the two flag about as many
    # validation anomalies (the paired test cannot tell them apart), and the classical scorer needs less RAM.
    assert choice["family"] == "classical" and choice["p_value"] >= 0.05 and "a tie" in choice["why"]
    assert classical["ram_bytes"] < network["ram_bytes"] and classical["fits"]
    assert network["windows"] == classical["windows"] > 0
    report = (out / "report.md").read_text()
    assert "scorer family: **classical**" in report
    assert f"threshold **{choice['classical']['threshold']:.4g}**" in report  # the served scorer's, not the network's
    assert card["c_runtime"]["family"] == "classical" and not (out / "model_prepare.c").exists()
    header = (out / "model_compiled.h").read_text()
    assert "int tinynas_score(const int16_t *input, float *score);" in header


def test_the_exported_c_scores_as_python_does(chosen, c_compiler, tmp_path):
    out, _ = chosen
    card = json.loads((out / "card.json").read_text())
    section = read_section(card)
    faults = machine(seed=13, count=20)
    got = host_scores((out / "model_compiled.c").read_text(), (out / "model_compiled.h").read_text(), faults.x,
                      tmp_path, c_compiler)
    python, threshold = served_scores(section, None, None, faults.x)
    assert np.all(np.abs(got[:, 0] - python) <= SCORE_TOLERANCE * (1 + python))
    clear = np.abs(python - threshold) > SCORE_TOLERANCE * (1 + python)
    assert np.array_equal(got[clear, 1] > 0, python[clear] > threshold)


def test_evaluate_scores_with_the_classical_scorer_and_finds_the_faults(chosen):
    out, _ = chosen
    card = json.loads((out / "card.json").read_text())
    evaluation = evaluate_scorer(out / "model.tflite", card, machine(seed=12, count=100))
    assert "classical" in evaluation.text() and evaluation.threshold == read_section(card).threshold
    assert evaluation.report["all_anomalies"]["auroc"] > 0.8
    assert evaluation.report["false_alarms"]["interval95"][0] <= RATE


def test_the_firmware_bundle_builds_and_runs_the_classical_scorer(chosen, c_compiler, tmp_path):
    from tinynas.deploy.bundle import firmware_zip

    out, _ = chosen
    with zipfile.ZipFile(io.BytesIO(firmware_zip(out))) as bundle:
        bundle.extractall(tmp_path)
        assert "tinynas_score" in bundle.read("README.txt").decode()
    built = subprocess.run([c_compiler, "-std=c99", "-Wall", "-Werror", "main.c", "model_compiled.c", "-lm", "-o",
                            "model"], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(["./model"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
    # Its window of zeros is a dead sensor: a number, and anomalous (it printed `score -nan: normal`).
    assert ran.stdout.strip() == "score 1e+06: anomalous", ran.stdout


def test_evaluate_calls_a_dead_sensor_anomalous_on_the_command_line(chosen, tmp_path):
    """`tinynas evaluate` on windows of a dead sensor (all zero) and of one stuck at a value, beside normal running:
    every dead window flagged, a number in the report (no NaN), the normal windows as before."""
    from tinynas.data.windows import Windows

    out, _ = chosen
    normal = only(machine(seed=31, count=40), [0])
    dead = np.zeros((20, LENGTH, 1), np.float32)
    dead[10:] = 0.8
    data = Windows(np.concatenate([normal.x, dead]), np.r_[np.zeros(len(normal.x), int), np.ones(20, int)],
                   np.r_[normal.groups, ["dead-sensor"] * 20], ("normal", "dead sensor"), normal.sample_rate_hz)
    data.save(tmp_path / "dead.npz")
    ran = subprocess.run([sys.executable, "-m", "tinynas.cli", "evaluate", str(out), "--data",
                          f"npz:{tmp_path / 'dead.npz'}", "--json"], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "nan" not in ran.stdout.lower()
    report = json.loads(ran.stdout)
    detected = report["classes"]["dead sensor"]["detected"]
    assert detected["flagged"] == detected["windows"] == 20 and report["classes"]["dead sensor"]["auroc"] == 1.0
    assert report["false_alarms"]["windows"] == len(normal.x)


def test_adapting_to_a_new_condition_fits_the_gaussian_again(chosen, tmp_path):
    from tinynas.adaptation.adapt import adapt

    out, _ = chosen
    louder = only(machine(seed=21, count=260), [0])
    louder = type(louder)(louder.x * 3.0, louder.y, louder.groups, louder.class_names, louder.sample_rate_hz,
                          louder.channel_names, louder.provenance)  # the machine at a higher load: 3x the vibration
    old = read_section(json.loads((out / "card.json").read_text()))
    old_scores, old_threshold = served_scores(old, None, None, louder.x)
    assert np.mean(old_scores > old_threshold) > 0.5  # the old Gaussian calls the new load a fault
    result = adapt(out, louder, tmp_path / "adapted")
    card = json.loads((tmp_path / "adapted" / "card.json").read_text())
    new = read_section(card)
    assert new.classical is not None and "the classical scorer's Gaussian" in result.adapted
    fresh = only(machine(seed=22, count=200), [0])
    scores, threshold = served_scores(new, None, None, fresh.x * 3.0)
    assert np.mean(scores > threshold) <= 0.15  # new normal running at that load: near the rate again
    assert "float *score" in (tmp_path / "adapted" / "model_compiled.h").read_text()
    assert LENGTH == new.classical.length


def test_the_status_page_shows_the_classical_scorer_not_the_network_finalist(chosen):
    from tinynas.service.state import Deployed
    from tinynas.service.status_views import served_model

    out, _ = chosen
    card = json.loads((out / "card.json").read_text())
    cost = card["anomaly"]["family_choice"]["classical"]["cost"]
    shown = served_model(Deployed(user="motor", model=str(out / "model.tflite"), card=str(out / "card.json"),
                                  task="anomaly"))
    assert shown["name"] == "features + Gaussian (classical)"
    assert (shown["ram_bytes"], shown["flash_bytes"]) == (cost["peak_ram_bytes"], cost["flash_bytes"])
    assert "int8 networks only" in shown["no_chip_check"]  # not the `tinynas hil` advice it cannot follow
    assert shown["download_notes"]["model.tflite"] == "the network finalist, not served"


def test_a_new_condition_is_kept_beside_the_old_one_in_python_and_in_c(chosen, c_compiler, tmp_path):
    from tinynas.adaptation.adapt import adapt

    out, _ = chosen
    heavy = only(machine(seed=23, count=260), [0])
    heavy = type(heavy)(heavy.x * 3.0, heavy.y, heavy.groups, heavy.class_names, heavy.sample_rate_hz,
                        heavy.channel_names, heavy.provenance)
    result = adapt(out, heavy, tmp_path / "two", condition="heavy load")
    section = read_section(result.card)
    assert [c.name for c in section.conditions] == ["as searched", "heavy load"]
    assert "2 conditions kept" in result.text()
    assert "served: the classical scorer, kept conditions as searched, heavy load" in result.text()
    assert "int8 accuracy" not in result.text()  # the network finalist's figures are not the served scorer's
    fresh = machine(seed=24, count=100)
    normal, faults = fresh.x[fresh.y == 0], fresh.x[fresh.y != 0]
    source = (tmp_path / "two" / "model_compiled.c").read_text()
    header = (tmp_path / "two" / "model_compiled.h").read_text()
    assert "TINYNAS_CONDITIONS 2" in header and "heavy load" in header
    for gain in (1.0, 3.0):  # back at the searched load, and at the heavy one: normal running is normal at both
        scores, threshold = served_scores(section, None, None, gain * normal)
        assert np.mean(scores > threshold) <= 3 * RATE
        fault_scores, _ = served_scores(section, None, None, gain * faults)
        assert np.mean(fault_scores > threshold) > 0.5
        windows = np.concatenate([gain * normal, gain * faults])
        got = host_scores(source, header, windows, tmp_path / f"c{gain:g}", c_compiler)
        python = np.concatenate([scores, fault_scores])
        assert np.all(np.abs(got[:, 0] - python) <= SCORE_TOLERANCE * (1 + python))
        clear = np.abs(python - threshold) > SCORE_TOLERANCE * (1 + python)
        assert np.array_equal(got[clear, 1] > 0, python[clear] > threshold)
    from tinynas.data.windows import Windows

    evaluation = evaluate_scorer(tmp_path / "two" / "model.tflite", result.card,
                                 Windows(np.concatenate([normal, 3.0 * normal, 3.0 * faults]),
                                         np.concatenate([np.zeros(2 * len(normal), int), np.ones(len(faults), int)]),
                                         np.array(["r"] * (2 * len(normal) + len(faults))), ("normal", "fault"),
                                         fresh.sample_rate_hz, fresh.channel_names, fresh.provenance))
    assert "conditions kept: as searched, heavy load" in evaluation.text()
    assert evaluation.report["false_alarms"]["interval95"][0] <= RATE
    # The same name again replaces that condition; the searched one stays.
    again = adapt(tmp_path / "two", heavy, tmp_path / "again", condition="heavy load")
    assert [c.name for c in read_section(again.card).conditions] == ["as searched", "heavy load"]
    # Without --condition the new one replaces them all (as before conditions were kept).
    alone = adapt(tmp_path / "two", heavy, tmp_path / "alone")
    assert read_section(alone.card).conditions == ()


def test_the_service_flow_keeps_the_new_condition_beside_the_old(chosen, tmp_path):
    from tinynas.adaptation.rewear_job import RewearJob
    from tinynas.data.windows import Windows
    from tinynas.service.rewear_child import _job

    out, _ = chosen
    heavy = only(machine(seed=25, count=260), [0])
    # The halves of an unlabelled recording, as the service records them, at 3x the vibration.
    halves = Windows(3.0 * heavy.x, (np.arange(len(heavy)) >= len(heavy) // 2).astype(int), heavy.groups,
                     ("first", "second"), heavy.sample_rate_hz, heavy.channel_names, heavy.provenance,
                     time_index=np.arange(len(heavy)))
    halves.save(tmp_path / "heavy.npz")
    job = RewearJob(mode="unlabelled", source=str(out), spec=f"npz:{tmp_path / 'heavy.npz'}",
                    staging=str(tmp_path / "staging"), condition="heavy load")
    assert RewearJob.from_dict(job.to_dict()) == job  # the job file carries the condition to the child
    outcome = _job(job)
    assert outcome.accepted and "conditions kept: as searched, heavy load" in outcome.reason
    assert outcome.old_threshold_flagged > 0.5  # the old scorer called the heavy load a fault
    section = read_section(json.loads((tmp_path / "staging" / "card.json").read_text()))
    assert [c.name for c in section.conditions] == ["as searched", "heavy load"]


def test_the_operator_asks_for_a_new_condition_and_then_names_the_load(chosen, tmp_path):
    from tinynas.adaptation.adapt import adapt
    from tinynas.errors import UsageError
    from tinynas.service import actions
    from tinynas.service.config import ServiceConfig
    from tinynas.service.paths import ServicePaths, pending_requests
    from tinynas.service.state import Deployed, ServiceState, save_state

    out, _ = chosen
    config = ServiceConfig(data_dir=str(tmp_path / "service"))
    paths = ServicePaths(config.data_dir)

    def serving(folder):
        paths.root.mkdir(parents=True, exist_ok=True)
        save_state(paths.state, ServiceState(state="SERVING", user="motor", deployed=Deployed(
            user="motor", model=str(folder / "model.tflite"), card=str(folder / "card.json"), task="anomaly",
            anomaly={"false_alarm_rate": RATE, "threshold": 1.0})))

    serving(out)
    said = actions.recalibrate(config, "motor", True, " heavy load ")
    assert "keeping its earlier conditions beside 'heavy load'" in said
    (_, wanted), = pending_requests(paths.requests, "recalibrate")
    assert wanted["condition"] == "heavy load" and wanted["unlabelled"] is True
    with pytest.raises(UsageError, match="other than 'live'"):
        actions.recalibrate(config, "motor", True, "live")
    with pytest.raises(UsageError, match="keeps one condition"):  # nothing to choose between yet
        actions.condition(config, "motor", "as searched")
    heavy = only(machine(seed=26, count=260), [0])
    two = adapt(out, type(heavy)(3.0 * heavy.x, heavy.y, heavy.groups, heavy.class_names, heavy.sample_rate_hz,
                                 heavy.channel_names, heavy.provenance), tmp_path / "two", condition="heavy load")
    serving(two.out_dir)
    assert "condition 'heavy load' requested" in actions.condition(config, "motor", "heavy load")
    assert "looks most like" in actions.condition(config, "motor", "live")
    with pytest.raises(UsageError, match="keeps 'as searched', 'heavy load'"):
        actions.condition(config, "motor", "half load")
    assert [w["condition"] for _, w in pending_requests(paths.requests, "condition")] == ["heavy load", "live"]


def test_served_live_a_load_change_and_back_raises_no_alarm_and_a_fault_does(chosen, tmp_path):
    from firmware_bridge.protocol import Samples
    from firmware_bridge.ring import SampleRing
    from tinynas.adaptation.adapt import adapt
    from tinynas.service.inference import ALARM, LiveScorer

    out, _ = chosen
    heavy = only(machine(seed=27, count=260), [0])
    two = adapt(out, type(heavy)(3.0 * heavy.x, heavy.y, heavy.groups, heavy.class_names, heavy.sample_rate_hz,
                                 heavy.channel_names, heavy.provenance), tmp_path / "two", condition="heavy load")
    fresh = machine(seed=28, count=40)
    normal, faults = fresh.x[fresh.y == 0], fresh.x[fresh.y == 1]
    # The machine as a stream of windows: light load, heavy load, light again, then a fault at the heavy load.
    stream = np.concatenate([*normal[:20], *(3.0 * normal[20:40]), *normal[:20], *(3.0 * faults[:20])])
    ring = SampleRing(1, len(stream) + LENGTH)
    live = LiveScorer(two.out_dir / "model.tflite", two.card, ring, hop_samples=LENGTH, k=3, n=5)
    ring.add(Samples(0, stream))
    said = live.step()
    assert len(said) == 80
    running, failing = said[:60], said[60:]
    assert [p.condition for p in running[5:15]] == ["as searched"] * 10
    assert [p.condition for p in running[25:35]] == ["heavy load"] * 10
    assert not any(p.alarm for p in running)  # a load change, and back: no alarm
    assert failing[-1].smoothed == ALARM and sum(p.alarm for p in failing) >= 10
    # The operator pins the light load while the machine runs heavy: read there, it is far from normal.
    ring = SampleRing(1, 20 * LENGTH)
    pinned = LiveScorer(two.out_dir / "model.tflite", two.card, ring, hop_samples=LENGTH, k=3, n=5)
    pinned.condition = "as searched"
    ring.add(Samples(0, np.concatenate(3.0 * normal[:20])))
    assert all(p.condition == "as searched" for p in pinned.step()) and pinned.alarm.raised


def test_the_page_shows_the_conditions_and_asks_for_them(chosen, tmp_path):
    import time

    from tests.support.browser import Browser
    from tests.support.net import free_port
    from tinynas.adaptation.adapt import adapt
    from tinynas.service.state import Deployed
    from tinynas.service.status_server import StatusServer
    from tinynas.service.status_views import served_model

    out, _ = chosen
    heavy = only(machine(seed=29, count=260), [0])
    two = adapt(out, type(heavy)(3.0 * heavy.x, heavy.y, heavy.groups, heavy.class_names, heavy.sample_rate_hz,
                                 heavy.channel_names, heavy.provenance), tmp_path / "two", condition="heavy load")
    deployed = Deployed(user="motor", model=str(two.out_dir / "model.tflite"), card=str(two.out_dir / "card.json"),
                        task="anomaly", anomaly={"false_alarm_rate": RATE, "threshold": 1.0, "calibration_windows": 130,
                                                 "alarm": {"k": 3, "n": 5}})
    status = {"state": "SERVING", "user": "motor", "error": "", "paused": "", "rewear": {}, "collection": {},
              "search": {}, "deployed": deployed.to_dict(), "predictions": [], "plans": ["motor-normal"],
              "serving": {"stale": ""}, "model": served_model(deployed), "models": [],
              "alarm": {"raised": False, "score": 4.2, "threshold": 20.0, "debounce": "3 of the last 5 windows",
                        "history": [], "condition": "heavy load", "chosen": "live"}}
    asked = []
    server = StatusServer(lambda: {**status, "time": time.time()}, host="127.0.0.1", port=free_port(),
                          actions=lambda kind, fields: asked.append((kind, fields)) or f"{kind} requested").start()
    browser = Browser(tmp_path / "chromium")
    try:
        browser.open(f"http://127.0.0.1:{server.address[1]}/")
        browser.wait_for("!document.getElementById('condition-box').hidden")
        assert ("Conditions kept: as searched, heavy load; read under the one each window looks most like (last "
                "window: heavy load)") in browser.text("#model")
        assert "model.tflite (the network finalist, not served)" in browser.text("#downloads")
        browser.evaluate("document.getElementById('condition-select').value = 'as searched'")
        browser.click("#condition-set")
        browser.wait_for("document.getElementById('action-result').textContent === 'condition requested'")
        browser.evaluate("document.getElementById('unlabelled').checked = true")
        browser.evaluate("document.getElementById('condition-name').value = ' half load '")
        browser.click("#recalibrate")
        browser.wait_for("document.getElementById('action-result').textContent === 'recalibrate requested'")
    finally:
        browser.close()
        server.stop()
    assert asked == [("condition", {"user": "motor", "condition": "as searched"}),
                     ("recalibrate", {"user": "motor", "unlabelled": True, "condition": "half load"})]


def test_the_device_lists_a_classical_folder_as_what_it_serves(chosen, tmp_path):
    import shutil

    from tinynas.service.models import stored_models, write_deployment
    from tinynas.service.state import Deployed

    out, _ = chosen
    folder = tmp_path / "profiles" / "motor" / "deployed" / "20261207-080000"
    shutil.copytree(out, folder)
    write_deployment(folder, Deployed(user="motor", model=str(folder / "model.tflite"), card=str(folder / "card.json"),
                                      task="anomaly", anomaly={"false_alarm_rate": RATE, "threshold": 1.0}))
    (listed,) = [m.summary(None) for m in stored_models(tmp_path / "profiles", "motor")]
    cost = json.loads((out / "card.json").read_text())["anomaly"]["family_choice"]["classical"]["cost"]
    assert listed["architecture"] == "features + Gaussian (classical)" and listed["runtime"] == "generated C, float32"
    assert listed["ram_bytes"] == cost["peak_ram_bytes"] and listed["held_out"] == {}


def test_a_condition_named_with_comment_marks_and_quotes_builds_in_the_bundle(chosen, c_compiler, tmp_path):
    """`tinynas adapt --condition 'load /* heavy "B"'`: the name is kept as given, and the bundle of the adapted
    folder builds under -Wall -Wextra -Werror (the header named it in a comment, where `/*` failed the build)."""
    from tinynas.deploy.bundle import firmware_zip

    out, _ = chosen
    heavy = only(machine(seed=32, count=260), [0])
    type(heavy)(3.0 * heavy.x, heavy.y, heavy.groups, heavy.class_names, heavy.sample_rate_hz, heavy.channel_names,
                heavy.provenance).save(tmp_path / "heavy.npz")
    name = 'load /* heavy "B" */ \\'
    ran = subprocess.run([sys.executable, "-m", "tinynas.cli", "adapt", str(out), "--data",
                          f"npz:{tmp_path / 'heavy.npz'}", "--out", str(tmp_path / "two"), "--condition", name],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert [c.name for c in read_section(json.loads((tmp_path / "two" / "card.json").read_text())).conditions] == \
        ["as searched", name]
    with zipfile.ZipFile(io.BytesIO(firmware_zip(tmp_path / "two"))) as bundle:
        bundle.extractall(tmp_path / "bundle")
    (tmp_path / "bundle" / "names.c").write_text(
        '#include <stdio.h>\n#include "model_compiled.h"\n'
        'int print_names(void) { return puts(tinynas_condition_names[TINYNAS_CONDITIONS - 1]); }\n')
    built = subprocess.run([c_compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "main.c", "names.c",
                            "model_compiled.c", "-lm", "-o", "model"], cwd=tmp_path / "bundle", capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
