"""The other side of the family rule (issue 59): on a quiet motor read in short windows, the network scorer flags
more faint synthetic faults than the features do, beyond chance, and the search serves it whatever it costs; on
windows neither finalist saw, it is the better detector too."""

import json

import numpy as np
import pytest

from tests.support.anomaly_machine import RATE, RECIPE, TARGET, Results, machine, only
from tinynas.anomaly.classical import ClassicalScorer
from tinynas.anomaly.perturb import perturb, shaft_hz
from tinynas.anomaly.scoring import int8_scores
from tinynas.anomaly.section import read_section
from tinynas.cost.targets import resolve_target
from tinynas.data.preprocess import Preprocessing
from tinynas.deploy.evaluate import load_model
from tinynas.study import Study

# Its module fixture runs a real search: the slow tier, so that the fast tier runs none (issue 69).
pytestmark = pytest.mark.slow

QUIET = 0.1
"""The sensor's noise floor: a tenth of the shaft harmonics' loudest (the suite's other motor has 0.5)."""


@pytest.fixture(scope="module")
def network_chosen(tmp_path_factory):
    out = tmp_path_factory.mktemp("network-family")
    progress = Results()
    # 1,500 normal windows: 300 to validate on, enough for the paired test to resolve a difference of ~10 %.
    Study(out, only(machine(seed=31, count=1500, noise=QUIET), [0]), resolve_target(**TARGET), strategy="random",
          budget_seconds=60, fidelity=RECIPE, final_fidelity=RECIPE, task="anomaly", false_alarm_rate=RATE, seed=0,
          progress=progress, clock=lambda: 10.0 * progress.results, runtime="tflm", accounting="arena").run()
    return out


def test_the_network_is_served_where_it_flags_more_beyond_chance(network_chosen):
    card = json.loads((network_chosen / "card.json").read_text())
    choice = card["anomaly"]["family_choice"]
    network, classical = choice["finalists"]
    assert choice["family"] == "network" and choice["p_value"] < 0.05 and "detects more" in choice["why"]
    assert network["detected"] > classical["detected"] and network["windows"] == classical["windows"] >= 250
    # Chosen although the classical scorer is cheaper: a better detector is not traded for RAM.
    assert classical["ram_bytes"] < network["ram_bytes"]
    assert read_section(card).classical is None and card["c_runtime"].get("family") != "classical"
    assert "scorer family: **network**" in (network_chosen / "report.md").read_text()


def test_on_windows_neither_saw_the_network_detects_more_faint_faults(network_chosen):
    card = json.loads((network_chosen / "card.json").read_text())
    section = read_section(card)
    held = card["anomaly"]["family_choice"]["classical"]
    classical = ClassicalScorer.from_dict(held["scorer"])
    fresh = only(machine(seed=32, count=600, noise=QUIET), [0])  # another motor of the kind, never seen
    faults, _ = perturb(fresh.x, fresh.sample_rate_hz, np.random.default_rng(5), shaft_hz(fresh.provenance))
    model = load_model(network_chosen / "model.tflite")
    prepare = Preprocessing.from_card(card).apply
    network_flags = int8_scores(model, prepare(faults), section.saturation_step) > section.threshold_steps
    classical_flags = classical.score(faults) > held["threshold"]
    assert network_flags.mean() > classical_flags.mean()
    # ... at about the same false-alarm rate on the fresh motor's normal running (600 windows, 60 recordings).
    network_alarms = int8_scores(model, prepare(fresh.x), section.saturation_step) > section.threshold_steps
    assert network_alarms.mean() <= 3 * RATE and (classical.score(fresh.x) > held["threshold"]).mean() <= 3 * RATE


def test_conditions_are_kept_for_a_classical_scorer_only(network_chosen, cli_in_process, tmp_path):
    fresh = tmp_path / "fresh.npz"
    only(machine(seed=33, count=240, noise=QUIET), [0]).save(fresh)
    ran = cli_in_process("adapt", str(network_chosen), "--data", f"npz:{fresh}", "--out",
                         str(tmp_path / "out"), "--condition", "heavy load")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert "classical anomaly scorer only" in ran.stderr and "leave --condition out" in ran.stderr
    assert not (tmp_path / "out").exists()
    ran = cli_in_process("adapt", str(network_chosen), "--data", f"npz:{fresh}", "--out",
                         str(tmp_path / "out"), "--condition", "live")
    assert ran.returncode == 2 and "other than 'live'" in ran.stderr and ran.stderr.count("\n") == 1
