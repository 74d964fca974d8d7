"""The study end to end on tiny data: real workers, real TensorFlow, real journal."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinynas.cost.targets import resolve_target
from tinynas.data.spec import load_windows
from tinynas.study import Study, StudyError
from tinynas.study.journal import Journal
from tinynas.study.settings import check_resumable
from tinynas.trial import Fidelity, TrialState

TINY = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
TARGET = dict(ram="2200", flash="64k", macs="1M")
FAST = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)
FINAL = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)


# TARGET's RAM was set to reject some candidates under TFLite Micro's arena alone: these tests budget with that
# rule (the `arena` accounting), so their searches keep their shape. The default (auto) is tested apart.
ARENA_RULE = dict(runtime="tflm", accounting="arena")


def _study(out, **kwargs):
    options = dict(strategy="paper", budget_seconds=300, fidelity=FAST, final_fidelity=FINAL, data_spec=TINY,
                   **ARENA_RULE)
    options.update(kwargs)
    return Study(out, load_windows(TINY), resolve_target(**TARGET), **options)


FAULTY_CANDIDATES = 3
"""Candidates the faulty run trains: paper's first row A(1,0), the poisoned A(1,1), A(1,2) refused by the RAM
budget (not counted), then A(2,0) of the next row: a failure, a candidate trained after it, an infeasible one and a
final stage, as in the whole search of 8 (47 CPU s against 27 for these, 2026-12-07)."""


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    # Bounded by candidates, the clock standing still: under load 8 on two cores the 300 s budget once ran out with
    # a candidate training, which was then interrupted, not trained (CI-shaped run, 2026-12-07).
    result = _study(out, fault_for=lambda arch: "nan" if (arch.k, arch.c) == (1, 1) else None,
                    max_candidates=FAULTY_CANDIDATES, clock=lambda: 0.0).run()
    return out, result


@pytest.mark.slow
def test_nan_candidate_is_failed_and_the_search_goes_on(faulty_run):
    _, result = faulty_run
    by_name = {t.architecture.name(): t for t in result.trials}
    poisoned = by_name["A(1,1)"]
    assert poisoned.state is TrialState.FAILED
    assert "NaN" in poisoned.error
    later = [t for t in result.trials if t.number > poisoned.number and t.state is TrialState.COMPLETE]
    assert later, "no candidate trained after the failure"
    assert result.winner.architecture.name() != "A(1,1)"
    # Diagnosed as non-finite, retried once at a tenth of the learning rate, failed again.
    assert poisoned.details["first_attempt"]["diagnosis"] == "nonfinite"
    assert poisoned.details["retry_learning_rate"] == pytest.approx(FAST.learning_rate / 10)
    assert poisoned.details["fault"] == "nan"


@pytest.mark.slow
def test_replay_reproduces_a_recorded_failure_and_a_success(faulty_run):
    from tinynas.study.replay import replay_trial

    out, result = faulty_run
    failed = next(t for t in result.trials if t.state is TrialState.FAILED)
    replay = replay_trial(out, failed.number)
    assert replay.reproduced, replay.summary()
    assert not replay.result.ok and "NaN" in replay.result.error
    complete = next(t for t in result.trials if t.state is TrialState.COMPLETE)
    command = [sys.executable, "-m", "tinynas.cli", "replay", str(out), "--trial", str(complete.number), "--json"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["reproduced"] and report["max_val_loss_difference"] <= 1e-6
    assert report["replayed"]["val_loss"] == pytest.approx(list(complete.val_loss), abs=1e-6)
    with pytest.raises(StudyError, match="no trial 999"):
        replay_trial(out, 999)


@pytest.mark.slow
def test_infeasible_candidates_are_never_trained(faulty_run):
    _, result = faulty_run
    infeasible = [t for t in result.trials if t.state is TrialState.INFEASIBLE]
    assert infeasible, "the tiny budget should reject some candidates"
    for trial in infeasible:
        assert trial.attempts == 0 and trial.seconds == 0 and not trial.val_loss
        assert trial.violations and trial.violations[0].startswith("RAM")
    trained = [t for t in result.trials if t.attempts > 0]
    assert all(not t.violations for t in trained)


@pytest.mark.slow
def test_study_writes_every_output_file(faulty_run):
    out, result = faulty_run
    for name in ("journal.sqlite", "best.json", "model.tflite", "model.c", "model.h", "card.json",
                 "report.md", "trials.png"):
        assert (out / name).stat().st_size > 0, name
    card = json.loads((out / "card.json").read_text())
    assert card["search"]["failed"] == 1
    assert card["search"]["infeasible"] == sum(t.state is TrialState.INFEASIBLE for t in result.trials)
    assert card["search"]["trained"] == sum(t.attempts > 0 for t in result.trials)
    assert set(card) >= {"float_test_accuracy", "int8_test_accuracy", "split", "data"}
    best = json.loads((out / "best.json").read_text())
    assert best["trial"] == result.winner.number
    # Where the workers' time went, TensorFlow's import apart (done by the launcher the workers fork from: ~0 in them).
    line = next(x for x in (out / "report.md").read_text().splitlines() if x.startswith("- worker time:"))
    imported = float(line.split("TensorFlow import ")[1].split(" s")[0])
    assert imported >= 0 and "epochs that traced or compiled" in line and "health monitor" in line


def _hashes(folder):
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_finished_run_is_never_searched_again_nor_overwritten(faulty_run, tmp_path):
    import shutil

    out, _ = faulty_run
    before = _hashes(out)
    with pytest.raises(StudyError, match="holds a finished search"):
        _study(out, resume=True).run()
    assert _hashes(out) == before
    # The data loss: the journal emptied (0 bytes) beside the finished run's outputs.
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "journal.sqlite").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (copy / f"journal.sqlite{suffix}").unlink(missing_ok=True)
    emptied = _hashes(copy)
    for resume in (True, False):
        with pytest.raises(StudyError, match="whose journal is empty"):
            _study(copy, resume=resume).run()
    assert _hashes(copy) == emptied


@pytest.mark.slow  # its fixture is a real search: none in the fast tier
def test_resume_with_other_settings_is_refused(faulty_run, tmp_path):
    import shutil

    # The run as it was before its final stage (a finished one is refused before settings are compared).
    out = tmp_path / "unfinished"
    shutil.copytree(faulty_run[0], out)
    with Journal(out / "journal.sqlite") as journal:
        journal.set_meta("finished", False)
    with pytest.raises(StudyError, match="cannot resume: strategy"):
        _study(out, strategy="random", resume=True).run()
    # Budgeted for another runtime, other candidates are feasible: another search.
    with Journal(out / "journal.sqlite") as journal:
        stored = journal.get_meta("settings")
    assert "runtime" not in stored and stored == _study(out).fingerprint()
    with pytest.raises(StudyError, match=r"cannot resume: runtime differ .*--runtime tflm --accounting arena: "
                                         r"resume with that"):
        _study(out, runtime="c", accounting="chip", resume=True).run()
    with pytest.raises(StudyError, match=r"cannot resume: runtime differ"):
        _study(out, runtime="auto", accounting="chip", resume=True).run()
    with pytest.raises(StudyError, match="nothing to resume"):
        _study(tmp_path / "empty", resume=True).run()


def _cli_search(out, *extra):
    return [sys.executable, "-m", "tinynas.cli", "search", "--data", TINY, "--ram", TARGET["ram"],
            "--flash", TARGET["flash"], "--macs", TARGET["macs"], "--budget", "5m", "--out", str(out),
            "--epochs", "2", "--learning-rate", "0.003", "--final-epochs", "2", "--runtime", "tflm",
            "--accounting", "arena", *extra]


def _rows(out):
    with sqlite3.connect(out / "journal.sqlite") as db:
        return db.execute("SELECT number, architecture, state, score, attempts FROM trials ORDER BY number").fetchall()


KILLED_CANDIDATES = ("--candidates", "6")
"""The killed search's bound (paper trains 8 here unbounded). It is killed once 3 candidates are complete and one is
running: on up to three workers (`--workers auto` on up to four cores) a candidate starts when the 3rd completes (the
4th, 5th or 6th), so one is still training, a whole training long, when the 3rd is seen complete; the resume retries
it and trains what is left, as unbounded."""


@pytest.mark.slow
def test_search_killed_mid_candidate_resumes_to_the_same_trials(tmp_path):
    reference = tmp_path / "reference"
    subprocess.run(_cli_search(reference, *KILLED_CANDIDATES), check=True, capture_output=True, timeout=600)

    killed = tmp_path / "killed"
    process = subprocess.Popen(_cli_search(killed, *KILLED_CANDIDATES), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    interrupted_number = None
    try:
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
            if not (killed / "journal.sqlite").exists():
                continue
            try:
                rows = _rows(killed)
            except sqlite3.OperationalError:
                continue
            complete = [r for r in rows if r[2] == "complete"]
            running = [r for r in rows if r[2] == "running"]
            if len(complete) >= 3 and running:
                os.kill(process.pid, signal.SIGKILL)
                interrupted_number = running[0][0]
                break
    finally:
        process.wait(timeout=60)
    assert interrupted_number is not None, "the search finished before it could be killed"
    assert process.returncode == -signal.SIGKILL
    assert [r for r in _rows(killed) if r[0] == interrupted_number][0][2] == "running"

    resumed = subprocess.run(_cli_search(killed, "--resume", *KILLED_CANDIDATES), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "retrying interrupted trial" in resumed.stderr
    expected, got = _rows(reference), _rows(killed)
    assert [r[:3] for r in got] == [r[:3] for r in expected]
    for ours, theirs in zip(got, expected):
        if ours[3] is not None:
            assert ours[3] == pytest.approx(theirs[3], rel=1e-5), ours
        assert ours[4] == theirs[4] + (1 if ours[0] == interrupted_number else 0)
    assert (killed / "model.tflite").exists()


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_with_the_journal_intact(tmp_path):
    out = tmp_path / "interrupted"
    # Ctrl-C as a terminal sends it: the child must not inherit an ignored SIGINT (a test run started in
    # the background of a script has one, and Python then never raises KeyboardInterrupt).
    # One worker and longer trainings: the candidate seen running is still training when the signal lands (two
    # workers forked at the same moment finish their first candidates together, and the one seen running could end
    # before the signal arrived).
    process = subprocess.Popen(_cli_search(out, "--workers", "1", "--epochs", "10"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    sent = False
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
        try:
            rows = _rows(out) if (out / "journal.sqlite").exists() else []
        except sqlite3.OperationalError:
            continue
        if any(r[2] == "complete" for r in rows) and any(r[2] == "running" for r in rows):
            process.send_signal(signal.SIGINT)
            sent = True
            break
    _, stderr = process.communicate(timeout=60)
    assert sent, "the search finished before it could be interrupted"
    assert process.returncode == 130
    assert "journal is intact" in stderr
    states = [r[2] for r in _rows(out)]
    assert "running" not in states and "interrupted" in states and "complete" in states


def _importing_launcher(pid: int) -> int | None:
    """The worker launcher (multiprocessing's forkserver) among `pid`'s children, once it is importing TensorFlow
    (its shared libraries mapped: the import goes on for seconds after)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for child in children:
        try:
            if (b"multiprocessing.forkserver" in Path(f"/proc/{child}/cmdline").read_bytes()
                    and b"tensorflow" in Path(f"/proc/{child}/maps").read_bytes()):
                return int(child)
        except OSError:
            pass
    return None


@pytest.mark.slow
def test_ctrl_c_while_the_workers_launcher_imports_tensorflow_is_one_line(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group, the launcher too, which spends its first seconds
    importing TensorFlow: the study's one line, and no traceback from the launcher."""
    process = subprocess.Popen(_cli_search(tmp_path / "out"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while _importing_launcher(process.pid) is None and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _importing_launcher(process.pid) is not None, "no launcher importing TensorFlow"
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "journal is intact" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr


@pytest.mark.slow
def test_fast_search_exports_its_winner_without_retraining(tmp_path):
    """...in a pool the caller warmed (as the device service does while the user records): the study
    trains in its workers, spawns none of its own, and leaves it running."""
    from tinynas.study.pool import WorkerPool

    recipe = Fidelity(4, 16, 3e-3, schedule="cosine")  # as fast's own recipe, shorter
    with WorkerPool(2).warm() as pool:
        warm = sorted(pool.worker_pids())
        # Ranked on validation windows: a cross-validated search retrains its winner on every window.
        result = _study(tmp_path, strategy="fast", fidelity=recipe, final_fidelity=recipe, pool=pool,
                        selection="validation").run()
        assert len(warm) == 2 and sorted(pool.worker_pids()) == warm and pool.spawned == 2
    raced = [t for t in result.trials if t.state is TrialState.COMPLETE]
    assert len(raced) >= 2 and all(t.fidelity.curve_stop and t.fidelity.subset == 1 for t in raced)
    assert result.winner in raced
    card = result.card.to_dict()
    assert card["final_training"]["retrained"] is False
    assert card["final_training"]["best_val_loss"] == result.winner.score
    assert (tmp_path / "weights" / f"trial-{result.winner.number}.weights.h5").exists()
    assert 0 <= card["int8_test_accuracy"] <= 1 and (tmp_path / "model.tflite").stat().st_size > 0
    assert card["final_training"]["schedule"] == "cosine"
    assert all(t.fidelity.schedule == "cosine" for t in raced)
    assert ("searched with the final recipe (4 epochs, lr 0.003 falling along a cosine); exported as trained"
            in (tmp_path / "report.md").read_text())
    for trial in raced:
        assert trial.details["timings"]["epochs_run"] == len(trial.val_loss)
        assert trial.details["finished_at"] > 0


@pytest.mark.parametrize("fault, words", [("dead", "is flat"), ("mixed", "labels were mixed up")])
def test_a_data_fault_stops_the_study_before_any_training(tmp_path, fault, words):
    import dataclasses

    import numpy as np

    windows = load_windows(TINY)
    if fault == "dead":
        x = windows.x.copy()
        x[:, :, 0] = 0.0
        windows = dataclasses.replace(windows, x=x)
    else:
        y = windows.y.copy()
        y[::2] = np.roll(y[::2], 1)
        windows = dataclasses.replace(windows, y=y)
    study = Study(tmp_path, windows, resolve_target(**TARGET), fidelity=FAST, final_fidelity=FINAL)
    with pytest.raises(StudyError, match=f"data problem: .*{words}"):
        study.run()
    assert not (tmp_path / "journal.sqlite").exists()


@pytest.mark.slow
def test_a_diverging_candidate_is_stopped_early_and_retried_at_a_safer_learning_rate(tmp_path):
    from tinynas.training.diagnose import INSTABILITIES, MIN_DIAGNOSIS_EPOCHS, shipped_diagnoser

    if shipped_diagnoser() is None:
        pytest.skip("no shipped diagnoser (run benchmarks/faults.py --save-model)")
    data = "synthetic:emg?windows_per_class=30"
    # 20 epochs: a diagnosis comes within a few (3-5 here), and every diagnosed candidate is trained again in full at
    # the safer rate, which is most of this test's time.
    recipe = Fidelity(epochs=20, batch_size=16, learning_rate=1e-2)
    # Budgeted by TFLite Micro's arena, the frontier this test was written on: under the C runtime's whole footprint
    # (the default since issue 37) the 8 KiB frontier is of larger networks that all thrash at lr 1.0 and again at
    # the retry's, so no candidate finishes and there is no report to read.
    # The first 4 of the frontier's 9 (largest compute first: A(6,4), A(8,2), A(6,3), A(9,1)), each diagnosed within
    # 3-8 epochs when the 9 were searched (the later ones took 64 % of the time): bounded by candidates, not by the
    # budget, which a loaded machine nearly spent on the 9. Each ratio below still fails on a regression (none
    # diagnosed, none retried, or all run their 20 epochs) and allows one borderline candidate.
    study = Study(tmp_path, load_windows(data), resolve_target(ram="8k", flash="16k", macs="2M"),
                  strategy="fast", budget_seconds=600, fidelity=recipe, final_fidelity=recipe, data_spec=data,
                  fault_for=lambda arch: "lr_x100", runtime="tflm", accounting="arena", max_candidates=4)
    result = study.run()
    trained = [t for t in result.trials if t.attempts]
    assert trained and all(t.details.get("fault") == "lr_x100" for t in trained)
    # At lr 1.0 most candidates thrash; a few still learn, and those are rightly left alone.
    diagnosed = [t for t in trained if "first_attempt" in t.details]
    assert len(diagnosed) >= len(trained) / 2
    for trial in diagnosed:
        first = trial.details["first_attempt"]
        assert first["diagnosis"] in INSTABILITIES, trial.details
        assert MIN_DIAGNOSIS_EPOCHS <= len(first["health"]) < 20
        assert trial.details["retry_learning_rate"] == pytest.approx(1e-3)
    # Most are stopped within a few epochs, far short of the 20 asked for. A borderline run (one that
    # thrashes but learns: A(10,0) here reached 73 % training accuracy at lr 1.0) may take longer: its
    # instability probability hovered at 0.5-0.67 for 24 epochs before it crossed 0.7.
    early = [t for t in diagnosed if len(t.details["first_attempt"]["health"]) <= 12]
    assert len(early) >= 0.75 * len(diagnosed)
    assert "diagnosed" in (tmp_path / "report.md").read_text()


def test_journals_from_before_the_split_gave_its_reason_still_resume(tmp_path):
    study = _study(tmp_path / "run")
    settings = study.fingerprint()
    assert "; not leave-one-session-out:" in settings["split"]  # one condition only: the text says why
    older = {**settings, "split": settings["split"].split("; not leave-one-session-out")[0]}
    check_resumable(older, settings, study.final_fidelity)  # same indices, older text: accepted
    with pytest.raises(StudyError, match="split"):
        check_resumable({**settings, "split": "by recording group"}, settings, study.final_fidelity)


def test_a_search_from_before_the_presets_is_told_how_to_resume(tmp_path):
    from tinynas.data.windows import Windows

    windows = load_windows(TINY)
    as_cwru = Windows(windows.x, windows.y, windows.groups, windows.class_names, windows.sample_rate_hz,
                      windows.channel_names, {**windows.provenance, "source": "cwru"}, sessions=windows.sessions,
                      time_index=windows.time_index)
    study = Study(tmp_path / "run", as_cwru, resolve_target(**TARGET), strategy="fast", fidelity=FAST, data_spec=TINY,
                  split="group")
    assert study.final_fidelity.augmentation is not None and study.space.kernel_size == 9  # the vibration preset
    settings = study.fingerprint()
    older = {**settings, "final_fidelity": {k: v for k, v in settings["final_fidelity"].items() if k != "augmentation"},
             "space": {**settings["space"], "kernel_size": 3}}
    with pytest.raises(StudyError, match="resume with --augment none --kernels 3"):
        check_resumable(older, settings, study.final_fidelity)


def test_a_study_started_by_a_worker_re_importing_a_script_says_to_add_the_main_guard(tmp_path, monkeypatch):
    # What spawn does to a script without `if __name__ == "__main__":` (the worker imports it while
    # bootstrapping); the study must refuse before it touches the folder.
    import multiprocessing

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(StudyError, match='if __name__ == "__main__"'):
        _study(tmp_path / "run").run()
    assert not (tmp_path / "run").exists()


def test_a_tflm_fingerprint_is_what_journals_from_before_runtime_hold(tmp_path):
    from tinynas.study.settings import fingerprint

    study = _study(tmp_path / "run")  # TFLite Micro's arena alone, as every journal before --runtime
    default = study.fingerprint()
    assert "runtime" not in default and "accounting" not in default  # so they still resume
    resolved = dict(data_digest="d", target={}, strategy="paper", seed=0, fidelity=FAST, space={}, split="s",
                    normalize="none", test_data_digest=None, final_fidelity=FINAL)
    assert fingerprint(**resolved) == fingerprint(**resolved, runtime="tflm", accounting="arena")
    compiled = _study(tmp_path / "run", runtime="c", accounting="chip").fingerprint()
    assert compiled == {**default, "runtime": "c"}
    # --runtime auto (the default) is the C runtime on this budget; TFLite Micro's whole footprint is its own rule.
    assert _study(tmp_path / "run", runtime="auto", accounting="chip").fingerprint() == compiled
    chip = _study(tmp_path / "run", runtime="tflm", accounting="chip").fingerprint()
    assert chip == {**default, "accounting": "chip"}
    check_resumable(default, default, study.final_fidelity)
    with pytest.raises(StudyError, match=r"cannot resume: runtime differ .*--runtime tflm"):
        check_resumable(default, compiled, study.final_fidelity)
    with pytest.raises(StudyError, match=r"cannot resume: runtime differ .*--runtime c"):
        check_resumable(compiled, default, study.final_fidelity)


def test_the_runtime_decides_which_candidates_are_feasible():
    from tinynas.cost.budget import Budget
    from tinynas.cost.targets import get_target
    from tinynas.space import Architecture
    from tinynas.study.outcomes import decide

    chip, bigger = get_target("STM32F030F4P6"), Architecture(512, 1, 10, k=4, c=2)
    as_tflm = decide(1, bigger, FAST, Budget.resolve(chip, "tflm"))
    assert as_tflm.state is TrialState.INFEASIBLE and as_tflm.violations[0].startswith("RAM")
    assert as_tflm.costs["runtime"] == "tflm"
    as_c = decide(1, bigger, FAST, Budget.resolve(chip, "c"))
    assert as_c.state is TrialState.FEASIBLE and as_c.costs["runtime"] == "c"
    assert as_c.costs["peak_ram_bytes"] < as_tflm.costs["peak_ram_bytes"]


def test_an_unknown_runtime_is_refused_before_anything_is_written(tmp_path):
    from tinynas.errors import UsageError

    with pytest.raises(UsageError, match="unknown runtime 'tvm'; choose one of: auto, c, tflm"):
        _study(tmp_path / "run", runtime="tvm")
    assert list(tmp_path.iterdir()) == []


def test_a_study_splits_and_fits_its_data_when_first_needed_not_when_made(tmp_path, monkeypatch):
    import tinynas.study.prepared as prepared

    made = []
    real = prepared.make_split
    monkeypatch.setattr(prepared, "make_split", lambda *args, **kwargs: made.append(1) or real(*args, **kwargs))
    study = _study(tmp_path / "run")
    assert made == [] and not (tmp_path / "run").exists()
    split = study.split
    assert made == [1] and study.split is split and study.preprocessing is study.prepared.preprocessing
    assert study.fingerprint() == _study(tmp_path / "run").fingerprint()  # the same, whenever made
    assert made == [1, 1]
