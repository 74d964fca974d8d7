"""The public API (`tinynas/__init__.py`): every exported name resolves, importing it leaves TensorFlow out,
and the example of docs/python-api.md runs as written, on tiny settings."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import tinynas

# docs/python-api.md's example with only its sizes made tiny: 32 windows of 64 samples instead of 240 of 512,
# 2 epochs per candidate and for the winner, one worker, two candidates (not seconds: a busy machine loses a race).
# The rest is as that page has it, the `__main__` guard included (the study's workers are spawned and import the
# script again).
DOCS_EXAMPLE_TINY = textwrap.dedent('''
    import sys

    import tinynas

    if __name__ == "__main__":  # a Study spawns worker processes, which import this file again
        windows = tinynas.load_windows(
            "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1")
        target = tinynas.get_target("STM32C011F6P6")
        print(tinynas.estimate(tinynas.Architecture(64, 1, 4, k=3, c=2)))   # RAM, flash, MACs before training
        result = tinynas.Study("run", windows, target, budget_seconds=3600, max_candidates=2,
                               fidelity=tinynas.Fidelity(epochs=2, batch_size=16, learning_rate=3e-3),
                               final_fidelity=tinynas.Fidelity(epochs=2, batch_size=16, learning_rate=3e-3),
                               workers=1).run()
        print(result.winner.architecture.name(), result.card.int8_test_accuracy)
        print(tinynas.evaluate("run", windows).text())   # the exported int8 model, run by LiteRT
        print("tensorflow imported:", "tensorflow" in sys.modules)
''')


def test_every_public_name_resolves():
    for name in tinynas.__all__:
        assert getattr(tinynas, name) is not None, name
    assert set(tinynas.__all__) <= set(dir(tinynas))
    assert issubclass(tinynas.TinynasError, Exception)


def test_a_name_outside_the_api_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'train'"):
        tinynas.train  # noqa: B018 - the lookup is the test


def test_importing_tinynas_does_not_import_tensorflow():
    # A fresh interpreter: this test process may have imported TensorFlow for other tests.
    code = ("import sys, tinynas\n"
            "assert 'tensorflow' not in sys.modules, 'import tinynas imported tensorflow'\n"
            "for name in tinynas.__all__:\n"
            "    getattr(tinynas, name)\n"
            "assert 'tensorflow' not in sys.modules, 'a public name imported tensorflow'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.slow
def test_the_docs_example_runs_on_tiny_settings(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(DOCS_EXAMPLE_TINY)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Cost(") and "peak_ram_bytes=" in lines[0]
    name, accuracy = lines[1].split()
    assert name.startswith("A(") and 0.0 <= float(accuracy) <= 1.0
    assert lines[2] == "run/model.tflite: 32 windows"
    assert any("confusion" in line for line in lines)
    # The study, the final stage's checks and evaluate ran in this process; only the workers load TensorFlow.
    assert lines[-1] == "tensorflow imported: False"
    for name in ("model.tflite", "model.c", "card.json", "journal.sqlite", "report.md"):
        assert (tmp_path / "run" / name).stat().st_size > 0, name


@pytest.mark.parametrize("call, words", [
    (lambda: tinynas.load_windows(None), "the data spec must be a string"),
    (lambda: tinynas.estimate("A(1,2)"), "the architecture must be an Architecture"),
    (lambda: tinynas.estimate(tinynas.Architecture(64, 1, 4, k=3, c=2), "x86"), "abi must be ilp32"),
    (lambda: tinynas.get_target(None), "the target must be a built-in target's name"),
    (lambda: tinynas.Study("run", "synthetic:vibration", "STM32C011F6P6"), "windows must be Windows (load a data"),
    (lambda: tinynas.Study("run", _tiny(), 3), "the target must be a Target"),
    (lambda: tinynas.Study("run", _tiny(), "STM32C011F6P6", seed=-1), "seed must be between 0"),
    (lambda: tinynas.evaluate("run", "synthetic:vibration"), "windows must be Windows"),
    (lambda: tinynas.adapt("run", "synthetic:vibration", "out"), "windows must be Windows"),
    (lambda: tinynas.recalibrate("run", _tiny(), "out", recipe={"epoch": 2}), "recipe has no field 'epoch'"),
    (lambda: tinynas.recalibrate("run", _tiny(), "out", seed=-1), "seed must be between 0"),
], ids=["spec None", "estimate a name", "estimate abi x86", "target None", "study a spec", "study a number", "seed -1",
        "evaluate a spec", "adapt a spec", "recipe dict", "recalibrate seed"])
def test_wrong_arguments_are_one_line_tinynas_errors(call, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tinynas.TinynasError) as info:
        call()
    assert words in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "out").exists()


def test_a_path_object_is_a_data_spec_and_a_target_name_is_a_target(tmp_path):
    import pathlib

    windows = _tiny()
    windows.save(tmp_path / "w.npz")
    assert len(tinynas.load_windows(pathlib.Path(f"npz:{tmp_path / 'w.npz'}"))) == len(windows)
    study = tinynas.Study(tmp_path / "run", windows, "STM32C011F6P6")
    assert study.target == tinynas.get_target("STM32C011F6P6")


def _tiny():
    return tinynas.load_windows("synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1")


def test_the_version_is_the_newest_one_the_changelog_names():
    import re
    from pathlib import Path

    changelog = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, flags=re.M)
    assert released, "CHANGELOG.md names no released version"
    assert tinynas.__version__ == released[0], (tinynas.__version__, released[0])
    assert [tuple(map(int, v.split("."))) for v in released] == sorted(
        (tuple(map(int, v.split("."))) for v in released), reverse=True), "newest first"
