"""Journal and output-folder safety (issue 16 items 1, 2, 3's --out cases, 8): real SQLite files, real
folders, a real read-only mount; every refusal happens before a file is written, and leaves every byte
as it was."""

from __future__ import annotations

import hashlib
import logging
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tinynas.cost.targets import resolve_target
from tinynas.data.spec import load_windows
from tinynas.errors import StorageError, UsageError
from tinynas.space import Architecture
from tinynas.study import FINAL_FIDELITY, Study, StudyError
from tinynas.study.final import final_recipes
from tinynas.study.journal import APPLICATION_ID, Journal, JournalError, inspect_journal
from tinynas.study.settings import check_resumable
from tinynas.trial import Fidelity, Trial, TrialState

TINY = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
TARGET = dict(ram="2200", flash="64k", macs="1M")
FAST = Fidelity(epochs=2, batch_size=16, learning_rate=3e-3)


def _study(out, **kwargs):
    options = dict(strategy="paper", budget_seconds=300, fidelity=FAST, final_fidelity=FAST, data_spec=TINY)
    options.update(kwargs)
    return Study(out, load_windows(TINY), resolve_target(**TARGET), **options)


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (names included: a new -wal or -shm file shows) and its SHA-256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- foreign and damaged journals ---------------------------------------------------------------
def _notes_db(path: Path, wal: bool = False, application_id: int = 0) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    if application_id:
        db.execute(f"PRAGMA application_id = {application_id}")
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("INSERT INTO notes (text) VALUES ('someone else''s data')")
    db.close()


def _lookalike_db(path: Path, application_id: int = 0, extra_table: bool = False) -> None:
    """Our two tables, but another program's (another application_id, or one table more)."""
    db = sqlite3.connect(path, isolation_level=None)
    if application_id:
        db.execute(f"PRAGMA application_id = {application_id}")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("CREATE TABLE trials (number INTEGER PRIMARY KEY, architecture TEXT NOT NULL, digest TEXT NOT "
               "NULL, fidelity TEXT NOT NULL, state TEXT NOT NULL, score REAL, val_loss TEXT NOT NULL, "
               "val_accuracy TEXT NOT NULL, costs TEXT NOT NULL, seconds REAL NOT NULL, error TEXT NOT NULL, "
               "attempts INTEGER NOT NULL, violations TEXT NOT NULL, updated REAL NOT NULL)")
    if extra_table:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()


def _newer_journal(path: Path) -> None:
    with Journal(path) as journal:
        journal.set_meta("settings", {})
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA user_version = 99")
    db.close()


FOREIGN = {
    "another program's database": (lambda p: _notes_db(p), "belongs to another program .tables notes"),
    "another program's WAL database": (lambda p: _notes_db(p, wal=True), "belongs to another program"),
    "our tables under another application_id": (lambda p: _lookalike_db(p, application_id=0x1234ABCD),
                                                "application_id 0x1234abcd"),
    "our tables and one more": (lambda p: _lookalike_db(p, extra_table=True), "tables meta, trials, users"),
    "not SQLite": (lambda p: p.write_bytes(b"\x00garbage, not a database\n" * 300), "not an SQLite database"),
    "an SQLite header and nothing else": (lambda p: p.write_bytes(b"SQLite format 3\x00" + bytes(200)),
                                          "not a readable tinynas journal .damaged or not ours: "
                                          "file is not a database"),
    "empty (0 bytes)": (lambda p: p.write_bytes(b""), "is empty .0 bytes."),
    "a tinynas journal from a newer version": (_newer_journal, "newer tinynas .journal schema 99"),
    "a folder": (lambda p: (p.mkdir(), (p / "keep.txt").write_text("mine\n")), "is a folder, not a tinynas journal"),
}


@pytest.mark.parametrize("resume", [False, True], ids=["new search", "resume"])
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_a_journal_that_is_not_ours_is_refused_and_left_byte_identical(tmp_path, kind, resume):
    make, words = FOREIGN[kind]
    out = tmp_path / "out"
    out.mkdir()
    make(out / "journal.sqlite")
    before = _snapshot(out)
    with pytest.raises(JournalError, match=words) as raised:
        _study(out, resume=resume).run()
    assert "\n" not in str(raised.value)
    assert _snapshot(out) == before  # same bytes, and no -wal, -shm or windows.npz appeared


@pytest.mark.parametrize("keep", [100, 2048, 4096 * 3])
def test_a_truncated_tinynas_journal_is_refused_and_left_byte_identical(tmp_path, keep):
    out = tmp_path / "out"
    out.mkdir()
    with Journal(out / "journal.sqlite") as journal:
        for number in range(1, 40):
            journal.put(Trial(number, Architecture(64, 1, 4, k=1 + number % 8, c=number % 3), FAST,
                              TrialState.COMPLETE, score=0.5, details={"padding": "x" * 500}))
    path = out / "journal.sqlite"
    path.write_bytes(path.read_bytes()[:keep])
    before = _snapshot(out)
    with pytest.raises(JournalError, match="not a tinynas journal|damaged|not a readable") as raised:
        _study(out, resume=True).run()
    assert "\n" not in str(raised.value)
    assert _snapshot(out) == before


def test_inspection_reads_without_creating_sqlite_side_files(tmp_path):
    path = tmp_path / "journal.sqlite"
    _notes_db(path, wal=True)
    before = _snapshot(tmp_path)
    with pytest.raises(JournalError):
        inspect_journal(path)
    with pytest.raises(JournalError):
        Journal(path)
    assert _snapshot(tmp_path) == before


def test_an_older_journal_killed_mid_run_is_adopted_with_its_write_ahead_log(tmp_path):
    # A journal of a tinynas without the stamp, copied while its writer was alive (as a power cut leaves
    # it): the tables and the trial are only in the -wal file, the main file's header says nothing.
    live = tmp_path / "live"
    live.mkdir()
    killed = tmp_path / "killed"
    killed.mkdir()
    db = sqlite3.connect(live / "journal.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE trials (number INTEGER PRIMARY KEY, architecture TEXT NOT NULL, digest TEXT NOT NULL,
            fidelity TEXT NOT NULL, state TEXT NOT NULL, score REAL, val_loss TEXT NOT NULL,
            val_accuracy TEXT NOT NULL, costs TEXT NOT NULL, seconds REAL NOT NULL, error TEXT NOT NULL,
            attempts INTEGER NOT NULL, violations TEXT NOT NULL, updated REAL NOT NULL,
            details TEXT NOT NULL DEFAULT '{}');""")
    row = Trial(1, Architecture(64, 1, 4, k=1, c=1), FAST, TrialState.COMPLETE, score=0.5).to_row()
    row["updated"] = 0.0
    db.execute(f"INSERT INTO trials ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(live / f"journal.sqlite{suffix}", killed / f"journal.sqlite{suffix}")
    db.close()
    path = killed / "journal.sqlite"
    assert int.from_bytes(path.read_bytes()[68:72], "big") == 0
    assert inspect_journal(path) == "legacy"
    with Journal(path) as journal:
        (trial,) = journal.trials()
    assert trial.score == 0.5 and trial.state is TrialState.COMPLETE
    assert int.from_bytes(path.read_bytes()[68:72], "big") == APPLICATION_ID  # stamped (checkpointed on close)
    assert inspect_journal(path) == "tinynas"


# ---- a finished run is never overwritten ---------------------------------------------------------
def _finished_outputs(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("best.json", '{"trial": 3}\n'), ("card.json", '{"classes": ["a", "b"]}\n'),
                       ("report.md", "# the user's finished run\n"), ("model.tflite", "TFL3 model bytes")):
        (out / name).write_text(text)


@pytest.mark.parametrize("journal", ["missing", "empty"])
@pytest.mark.parametrize("resume", [False, True], ids=["new search", "resume"])
def test_outputs_without_their_journal_are_never_overwritten(tmp_path, journal, resume):
    out = tmp_path / "run"
    _finished_outputs(out)
    if journal == "empty":
        (out / "journal.sqlite").write_bytes(b"")
    before = _snapshot(out)
    with pytest.raises(StudyError, match=f"holds the outputs of a run .*whose journal is {journal}"):
        _study(out, resume=resume).run()
    assert _snapshot(out) == before


def test_resuming_a_finished_search_does_not_search_again(tmp_path):
    out = tmp_path / "run"
    _finished_outputs(out)
    with Journal(out / "journal.sqlite") as journal:
        journal.put(Trial(1, Architecture(64, 1, 4, k=1, c=1), FAST, TrialState.COMPLETE, score=0.5))
        journal.set_meta("finished", True)
    before = _snapshot(out)
    with pytest.raises(StudyError, match="holds a finished search"):
        _study(out, resume=True).run()
    assert _snapshot(out) == before


# ---- the output folder is checked before anything is written --------------------------------------
def test_an_out_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("the user's notes\n")
    before = _snapshot(tmp_path)
    with pytest.raises(UsageError, match="is a file, not a folder"):
        _study(target).run()
    with pytest.raises(UsageError, match="is a file, so the folder cannot be made"):
        _study(target / "run").run()
    assert _snapshot(tmp_path) == before



@pytest.mark.parametrize("where", ["the mount itself", "a folder to create under it"])
def test_an_out_on_a_read_only_file_system_is_refused_before_anything_is_written(read_only_mount, where):
    out = read_only_mount if where == "the mount itself" else read_only_mount / "runs" / "emg"
    with pytest.raises(StorageError, match="read-only file system"):
        _study(out).run()
    assert list(read_only_mount.iterdir()) == []


@pytest.mark.parametrize("option, value", [("workers", 0), ("workers", -2), ("workers", 1.5),
                                           ("threads_per_worker", 0), ("max_jobs_per_worker", 0),
                                           ("budget_seconds", 0), ("budget_seconds", float("nan")),
                                           ("budget_seconds", -5)])
def test_numeric_settings_are_checked_before_anything_is_written(tmp_path, option, value):
    with pytest.raises(UsageError, match="must be"):
        _study(tmp_path / "out", **{option: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra", [["--workers", "0"], ["--threads", "0"], ["--workers", "-2"]])
def test_the_cli_refuses_bad_numbers_in_one_line_before_writing(tmp_path, extra):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tinynas.cli", "search", "--data", TINY, "--ram", TARGET["ram"],
               "--flash", TARGET["flash"], "--macs", TARGET["macs"], "--budget", "5m", "--out", str(out), *extra]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 2, shown.stderr
    lines = shown.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinynas: error:"), shown.stderr
    assert not out.exists()


# ---- item 8: the resume fingerprint holds the final recipe; the fallback keeps the safer lr ----------
def _journal_of(study: Study, settings: dict) -> None:
    study.out_dir.mkdir(parents=True, exist_ok=True)
    with Journal(study.out_dir / "journal.sqlite") as journal:
        journal.set_meta("settings", settings)
        journal.put(Trial(1, Architecture(64, 1, 4, k=1, c=1), FAST, TrialState.RUNNING, attempts=1))


def test_a_resume_with_another_final_recipe_is_refused(tmp_path):
    first = _study(tmp_path, strategy="fast", final_fidelity=Fidelity(4, 16, 3e-3))
    _journal_of(first, first.fingerprint())
    before = _snapshot(tmp_path)
    with pytest.raises(StudyError, match="cannot resume: final_fidelity differ"):
        _study(tmp_path, strategy="fast", final_fidelity=Fidelity(8, 16, 3e-3), resume=True).run()
    assert _snapshot(tmp_path) == before


def test_with_no_final_recipe_given_each_strategy_has_its_own(tmp_path):
    from tinynas.search.fast import FAST_RECIPE

    fast = _study(tmp_path / "fast", strategy="fast", final_fidelity=None).final_fidelity
    paper = _study(tmp_path / "paper", final_fidelity=None).final_fidelity
    assert (fast.epochs, fast.learning_rate, fast.schedule) == (FAST_RECIPE.epochs, 0.01, "cosine")
    assert (paper.epochs, paper.learning_rate, paper.schedule) == (100, 0.01, "constant")  # the method's


@pytest.mark.slow  # the resumed search trains, runs its final stage and exports for real: 40-70 s of the fast tier
def test_a_resume_with_no_final_recipe_given_goes_on_with_the_journals(tmp_path, caplog):
    """A search started with another recipe (an older tinynas's default for fast, or another --final-epochs)
    is resumed with the journal's, not refused; a recipe given on resume must still match."""
    started = Fidelity(2, 16, 3e-3)
    first = _study(tmp_path, strategy="fast", final_fidelity=started, budget_seconds=1)
    _journal_of(first, first.fingerprint())
    before = _snapshot(tmp_path)
    with pytest.raises(StudyError, match="final_fidelity differ"):
        _study(tmp_path, strategy="fast", final_fidelity=replace(started, schedule="cosine"), resume=True).run()
    assert _snapshot(tmp_path) == before
    resumed = _study(tmp_path, strategy="fast", final_fidelity=None, resume=True)
    with caplog.at_level(logging.INFO, logger="tinynas.progress"):
        result = resumed.run()
    assert resumed.final_fidelity == first.final_fidelity and result.card is not None
    with Journal(tmp_path / "journal.sqlite") as journal:
        assert journal.get_meta("settings")["final_fidelity"] == started.to_dict()
    assert "resuming with the journal's final recipe: 2 epochs, lr 0.003, constant rate" in caplog.text


def test_an_older_journal_without_the_final_recipe_resumes_only_with_the_default(tmp_path):
    default = _study(tmp_path, final_fidelity=FINAL_FIDELITY)
    settings = default.fingerprint()
    old = {key: value for key, value in settings.items() if key != "final_fidelity"}
    check_resumable(old, settings, default.final_fidelity)  # the default recipe: accepted
    other = _study(tmp_path, final_fidelity=Fidelity(30, 16, 0.01))
    with pytest.raises(StudyError, match="final_fidelity"):
        check_resumable(old, other.fingerprint(), other.final_fidelity)


def test_the_winners_fallback_retraining_uses_its_safer_learning_rate(tmp_path):
    study = _study(tmp_path, final_fidelity=Fidelity(5, 16, 0.01))
    retried = Trial(2, Architecture(64, 1, 4, k=2, c=1), Fidelity(4, 16, 1.0), TrialState.COMPLETE, score=0.4,
                    details={"first_attempt": {"diagnosis": "diverging"}, "retry_learning_rate": 0.1})
    final, fallback = final_recipes(study.final_fidelity, retried)
    assert final == Fidelity(5, 16, 0.01)
    assert fallback == Fidelity(4, 16, 0.1)  # not lr 1.0, which the diagnoser found diverging
    plain = retried.evolve(details={})
    assert final_recipes(study.final_fidelity, plain)[1] == Fidelity(4, 16, 1.0)


def test_the_search_docs_state_the_diagnosers_stop_probability_of_the_code():
    from tinynas.training.diagnose import STOP_PROBABILITY

    # The training-health rules moved from the README to docs/search.md; the figure there must be the code's.
    search_docs = (Path(__file__).resolve().parents[2] / "docs" / "search.md").read_text()
    assert f"at probability >= {STOP_PROBABILITY:g}" in search_docs

