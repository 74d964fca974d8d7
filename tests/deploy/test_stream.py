"""The stream's judge: what serving answers along a recording, and the verdict on it.

The promise: the judge scores exactly what a person sees live, window for window (a recording replayed through
the service's LiveClassifier gives the same answers at the same samples), and it counts signs, not windows.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from firmware_bridge.protocol import Samples
from firmware_bridge.ring import SampleRing
from tests.support.sessions import write_session
from tinynas.data.recording import load_recording
from tinynas.data.synthetic import vibration
from tinynas.deploy.served import UNKNOWN, IdleRule, ServedPath, Smoother, Smoothing
from tinynas.deploy.stream import judge_stream, positions
from tinynas.service.inference import LiveClassifier


def _served_folder(exported_tiny, tmp_path, rule: IdleRule):
    """The tiny model's folder with a served card: its classes, and serving's idle rule."""
    _, _, paths = exported_tiny
    folder = paths.tflite_path.parent
    card = json.loads((folder / "card.json").read_text())
    card["serving"] = rule.to_dict()
    return folder / "model.tflite", card


def _session(tmp_path, seed=0):
    data = vibration(windows_per_class=12, seed=11)
    rng = np.random.default_rng(seed)
    rest = rng.normal(0, 0.02, (24_000, 1)).astype(np.float32)  # 2 s of a quiet sensor at 12 kHz
    signs = []
    for label in ("inner_race", "outer_race", "ball", "inner_race", "normal"):
        mine = data.x[data.y == data.class_names.index(label)]
        signs.append((label, np.concatenate(mine[rng.choice(len(mine), 3, replace=False)])))  # 3 windows long
    written = write_session(tmp_path / "session", signs, rate=12_000.0, rest=rest, classes=data.class_names,
                            window=512, idle_seconds=0.2, seed=seed)
    return load_recording(tmp_path / "session"), written


def test_a_recording_holds_each_sign_where_it_was_performed(tmp_path):
    recording, written = _session(tmp_path)
    assert [e.label for e in recording.events] == [w["label"] for w in written]
    for event, truth in zip(recording.events, written):
        assert event.onset == truth["onset"]
        assert abs(event.end - truth["end"]) <= 2 * 120  # the envelope's end: within two 10 ms frames
    assert recording.window_length == 512 and recording.sample_rate_hz == 12_000.0


def test_the_judge_answers_what_serving_answers_on_the_replayed_recording_window_for_window(exported_tiny,
                                                                                         tmp_path):
    recording, _ = _session(tmp_path)
    model_path, card = _served_folder(exported_tiny, tmp_path, IdleRule(0.6, 0.05, "normal", "test"))
    hop = 128
    # Serving: the stream arrives in blocks into the device's ring; a prediction every hop.
    ring = SampleRing(1, recording.end + 10)
    live = LiveClassifier(model_path, card, ring, hop, smoothing=3)
    served_live = []
    for first in range(0, recording.end, 700):
        block = recording.samples(first, min(700, recording.end - first))
        ring.add(Samples(first, block))
        served_live += live.step()
    judged = positions(ServedPath.from_folder(model_path, card), recording, hop, Smoothing.from_card(card, 3),
                       first_end=512)
    assert len(judged) == len(served_live) > 100
    for mine, theirs in zip(judged, served_live):
        assert (mine.end, mine.answer.label, mine.shown) == (theirs.end_sample, theirs.label, theirs.smoothed)
        assert mine.answer.confidence == pytest.approx(theirs.confidence)


def test_the_verdict_counts_signs_and_their_windows_idle_and_latency(exported_tiny, tmp_path):
    recording, _ = _session(tmp_path)
    model_path, card = _served_folder(exported_tiny, tmp_path, IdleRule(0.0, 0.05, "normal", "test"))
    served = ServedPath.from_folder(model_path, card)
    verdict = judge_stream(served, recording, 128, Smoothing(k=2, n=3, sure=0.9))
    assert verdict.signs == 5 and sum(c["signs"] for c in verdict.per_class.values()) == 5
    assert verdict.per_class["inner_race"]["signs"] == 2
    # Three windows long: every sign has sign windows; the idle rest between is the rest class or unknown.
    assert verdict.sign_windows >= 5 * 6 and verdict.idle_windows > 0
    assert verdict.idle_right == verdict.idle_windows  # under still_rms: the rest class, by the still rule
    assert verdict.recognised >= 3 and len(verdict.latencies) == verdict.recognised
    assert all(0 <= latency <= 0.2 for latency in verdict.latencies)
    data = verdict.to_dict()
    assert data["interval"][0] <= data["recognised_share"] <= data["interval"][1]
    assert "signs recognised" in verdict.words()


def test_a_model_that_answers_unknown_everywhere_recognises_nothing_and_says_which_classes_fail(exported_tiny,
                                                                                                 tmp_path):
    recording, _ = _session(tmp_path)
    model_path, card = _served_folder(exported_tiny, tmp_path, IdleRule(1.01, 0.0, UNKNOWN, "test"))
    verdict = judge_stream(ServedPath.from_folder(model_path, card), recording, 128, Smoothing(k=2, n=3))
    assert verdict.recognised == 0 and verdict.sign_unknown == verdict.sign_windows
    assert set(verdict.failing()) == {"inner_race: 0 of 2", "outer_race: 0 of 1", "ball: 0 of 1", "normal: 0 of 1"}


def test_agreement_follows_a_sure_answer_at_once_and_holds_against_one_stray():
    smoother = Smoother(Smoothing(k=2, n=3, sure=0.9))
    shown = [smoother.update(label, confidence) for label, confidence in
             [("rest", 0.8), ("rest", 0.8), ("fist", 0.95), ("open", 0.6), ("fist", 0.7), ("rest", 0.7)]]
    assert shown == [UNKNOWN, "rest", "fist", "fist", "fist", "fist"]
    majority = Smoother(Smoothing.majority(3))
    assert [majority.update(label, 0.5) for label in ["a", "a", "b", "b", "b"]] == [UNKNOWN, "a", "a", "b", "b"]


def test_evaluate_judges_a_model_on_a_sessions_stream_as_well_as_on_its_cut_windows(exported_tiny, tmp_path):
    import subprocess
    import sys

    _session(tmp_path)
    folder = exported_tiny[2].tflite_path.parent
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "evaluate", str(folder), "--data",
                          f"session:{tmp_path / 'session'}", "--stream", str(tmp_path / "session"), "--hop", "10ms",
                          "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["n_windows"] == 5 and report["stream"]["signs"] == 5  # the cut windows, and the signs on the stream
    assert report["stream"]["sign_windows"] > report["n_windows"] and report["stream"]["hop_seconds"] == 0.01
    text = subprocess.run([sys.executable, "-m", "tinynas.cli", "evaluate", str(folder), "--data",
                           f"session:{tmp_path / 'session'}", "--stream", str(tmp_path / "session")],
                          capture_output=True, text=True, timeout=600)
    assert text.returncode == 0 and "on the stream: " in text.stdout and "inner_race: " in text.stdout
    bad = subprocess.run([sys.executable, "-m", "tinynas.cli", "evaluate", str(folder), "--data",
                          f"session:{tmp_path / 'session'}", "--stream", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and bad.stderr.startswith("tinynas: error: ") and "Traceback" not in bad.stderr
