"""A full disk (issue 16): a real small tmpfs filled with a ballast file. Every write the disk refuses is
one line (StorageError), nothing committed is lost, and once space is freed `--resume` finishes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinynas.atomic import atomic_write_text
from tinynas.errors import StorageError
from tinynas.space import Architecture
from tinynas.study.journal import Journal, inspect_journal
from tinynas.trial import Fidelity, Trial, TrialState

TINY = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
TARGET = dict(ram="2200", flash="64k", macs="1M")
FAST = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)



def fill(disk: Path) -> Path:
    """Write a ballast file until the file system says ENOSPC; return it (delete it to free the space)."""
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as handle:
        for size in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    handle.write(b"\xff" * size)
            except OSError:
                continue
    return ballast


def _trial(number: int, padding: int = 0) -> Trial:
    return Trial(number, Architecture(64, 1, 4, k=1 + number % 8, c=1), FAST, TrialState.COMPLETE, score=0.5,
                 details={"padding": "x" * padding})


def test_an_atomic_write_on_a_full_disk_keeps_the_old_file(small_disk):
    path = small_disk / "best.json"
    atomic_write_text(path, '{"trial": 1}\n')
    ballast = fill(small_disk)
    with pytest.raises(StorageError) as raised:
        atomic_write_text(path, '{"trial": 2, "padding": "' + "x" * 20000 + '"}\n')
    message = str(raised.value)
    assert "\n" not in message and f"cannot write {path}: no space left" in message
    assert "run the same command again" in message  # a plain write has no journal to resume from
    assert path.read_text() == '{"trial": 1}\n'
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast", "best.json"]  # no temp file left
    ballast.unlink()
    atomic_write_text(path, '{"trial": 2}\n')
    assert path.read_text() == '{"trial": 2}\n'


def test_the_journal_on_a_full_disk_says_so_and_keeps_every_commit(small_disk):
    path = small_disk / "journal.sqlite"
    committed = 0
    with Journal(path) as journal:
        journal.put(_trial(0))
        committed = 1
        ballast = fill(small_disk)
        with pytest.raises(StorageError) as raised:
            for number in range(1, 2000):
                journal.put(_trial(number, padding=8000))
                committed += 1
    message = str(raised.value)
    assert "\n" not in message and "no space left" in message, message
    assert inspect_journal(path) == "tinynas"
    with Journal(path) as journal:
        assert [t.number for t in journal.trials()] == list(range(committed))
    ballast.unlink()
    with Journal(path) as journal:
        journal.put(_trial(committed, padding=8000))
        assert len(journal.trials()) == committed + 1


def test_a_journal_that_cannot_be_created_on_a_full_disk_leaves_no_file(small_disk):
    ballast = fill(small_disk)
    with pytest.raises(StorageError, match="no space left"):
        Journal(small_disk / "journal.sqlite")
    # An empty journal.sqlite left behind would later be refused as "not a tinynas journal".
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast"]
    ballast.unlink()
    with Journal(small_disk / "journal.sqlite") as journal:
        journal.put(_trial(1))
    assert inspect_journal(small_disk / "journal.sqlite") == "tinynas"


@pytest.mark.slow
def test_a_search_that_fills_the_disk_stops_in_one_line_and_resumes_once_space_is_freed(small_disk):
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.progress import Progress
    from tinynas.study import Study

    class FillAfterFirstResult(Progress):
        """Fills the disk the moment the first candidate's result is announced (a real search's pace)."""

        def __init__(self):
            super().__init__(interactive=False)
            self.announced = 0
            self.ballast = None

        def event(self, text: str) -> None:
            super().event(text)
            if text.startswith("trial") and " loss " in text:  # validated or cross-validated
                self.announced += 1
                if self.ballast is None:
                    self.ballast = fill(small_disk)

    out = small_disk / "run"
    windows, target = load_windows(TINY), resolve_target(**TARGET)
    # TARGET was set for TFLite Micro's arena alone (and the small disk for that search's files): that rule.
    options = dict(strategy="paper", budget_seconds=600, fidelity=FAST, final_fidelity=FAST, data_spec=TINY,
                   runtime="tflm", accounting="arena")
    progress = FillAfterFirstResult()
    with pytest.raises(StorageError) as raised:
        Study(out, windows, target, progress=progress, **options).run()
    message = str(raised.value)
    assert "\n" not in message and "no space left" in message and "--resume" in message, message
    assert progress.ballast is not None and progress.announced >= 1

    assert inspect_journal(out / "journal.sqlite") == "tinynas"
    with Journal(out / "journal.sqlite") as journal:
        before = {t.number: t for t in journal.trials()}
    complete = {n: t for n, t in before.items() if t.state is TrialState.COMPLETE}
    assert len(complete) >= progress.announced  # every announced result was committed first

    progress.ballast.unlink()
    result = Study(out, windows, target, resume=True, **options).run()
    after = {t.number: t for t in result.trials}
    for number, trial in complete.items():  # not retrained: the same results, from the journal
        assert after[number].state is TrialState.COMPLETE and after[number].score == trial.score
    for name in ("model.tflite", "card.json", "report.md", "best.json"):
        assert (out / name).stat().st_size > 0, name


@pytest.mark.slow
def test_a_worker_that_cannot_save_weights_on_a_full_disk_leaves_its_candidate_to_resume(small_disk):
    """`fast` trains with the final recipe and its workers save each candidate's weights into --out: a
    full disk there is the disk's failure, not the candidate's (it must not be recorded as failed)."""
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.progress import Progress
    from tinynas.study import Study

    class FillWhileTheFirstTrains(Progress):
        def __init__(self):
            super().__init__(interactive=False)
            self.ballast = None

        def update(self, fraction, text):
            super().update(fraction, text)
            if self.ballast is None:  # the first candidate is training (its worker is importing TensorFlow)
                self.ballast = fill(small_disk)

    out = small_disk / "run"
    windows, target = load_windows(TINY), resolve_target(**TARGET)
    recipe = Fidelity(3, 16, 3e-3)
    # Ranked on the validation side: there the workers save each candidate's weights (a cross-validated
    # search's fold models are not kept; the test above fills the disk under one).
    options = dict(strategy="fast", budget_seconds=600, fidelity=recipe, final_fidelity=recipe, data_spec=TINY,
                   selection="validation")
    progress = FillWhileTheFirstTrains()
    with pytest.raises(StorageError, match="no space left") as raised:
        Study(out, windows, target, progress=progress, **options).run()
    assert "\n" not in str(raised.value) and "a worker could not write" in str(raised.value)
    with Journal(out / "journal.sqlite") as journal:
        states = [t.state for t in journal.trials() if t.attempts]
    # Not FAILED: --resume trains it again (journaled as interrupted when the full disk let that be written).
    assert len(states) == 1 and states[0] in (TrialState.RUNNING, TrialState.INTERRUPTED), states

    progress.ballast.unlink()
    result = Study(out, windows, target, resume=True, **options).run()
    first = min((t for t in result.trials if t.attempts), key=lambda t: t.number)
    assert first.state is TrialState.COMPLETE and first.attempts == 2
    assert (out / "model.tflite").stat().st_size > 0
