import sqlite3

import pytest

from tinynas.space import Architecture
from tinynas.study.journal import APPLICATION_ID, SCHEMA_VERSION, Journal, JournalError, inspect_journal
from tinynas.trial import Fidelity, Trial, TrialState


def _trial(number, state=TrialState.COMPLETE, **kwargs):
    return Trial(number, Architecture(64, 1, 4, k=number, c=1), Fidelity(3), state, **kwargs)


def test_trials_round_trip(tmp_path):
    with Journal(tmp_path / "j.sqlite") as journal:
        journal.put(_trial(1, score=0.5, val_loss=(0.7, 0.5), val_accuracy=(0.4, 0.6), costs={"macs": 10}))
        journal.put(_trial(2, TrialState.INFEASIBLE, violations=("RAM 9.0 KiB > 4.0 KiB",)))
        journal.put(_trial(1, TrialState.FAILED, error="boom"))  # a state change replaces the row
    with Journal(tmp_path / "j.sqlite") as journal:
        trials = journal.trials()
    assert [t.number for t in trials] == [1, 2]
    assert trials[0].state is TrialState.FAILED and trials[0].error == "boom"
    assert trials[1].violations == ("RAM 9.0 KiB > 4.0 KiB",)
    assert trials[1].architecture == Architecture(64, 1, 4, k=2, c=1)


def test_trial_row_round_trip_keeps_everything():
    trial = _trial(3, score=0.25, val_loss=(0.3, 0.25), val_accuracy=(0.5, 0.75), costs={"macs": 7},
                   seconds=1.5, attempts=2, details={"stopped": "patience", "timings": {"build": 0.1}})
    assert Trial.from_row(trial.to_row()) == trial
    assert trial.best_val_accuracy == 0.75


def test_meta_values(tmp_path):
    with Journal(tmp_path / "j.sqlite") as journal:
        journal.set_meta("settings", {"seed": 1, "strategy": "paper"})
        assert journal.get_meta("settings") == {"seed": 1, "strategy": "paper"}
        assert journal.get_meta("missing") is None


def test_commits_are_visible_to_another_connection_at_once(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal(path) as journal:
        journal.put(_trial(1))
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 1


def test_a_corrupt_journal_is_a_clear_error(tmp_path):
    path = tmp_path / "j.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    before = path.read_bytes()
    with pytest.raises(JournalError, match="not a tinynas journal .not an SQLite database"):
        Journal(path)
    assert path.read_bytes() == before


def test_a_new_journal_is_stamped_in_its_header(tmp_path):
    path = tmp_path / "j.sqlite"
    with Journal(path) as journal:
        journal.put(_trial(1))
    header = path.read_bytes()[:100]
    assert int.from_bytes(header[68:72], "big") == APPLICATION_ID == int.from_bytes(b"TNAS", "big")
    assert int.from_bytes(header[60:64], "big") == SCHEMA_VERSION
    assert inspect_journal(path) == "tinynas"


def test_a_journal_written_before_trials_had_details_still_opens(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE trials (number INTEGER PRIMARY KEY, architecture TEXT NOT NULL, digest TEXT NOT NULL,
                fidelity TEXT NOT NULL, state TEXT NOT NULL, score REAL, val_loss TEXT NOT NULL,
                val_accuracy TEXT NOT NULL, costs TEXT NOT NULL, seconds REAL NOT NULL, error TEXT NOT NULL,
                attempts INTEGER NOT NULL, violations TEXT NOT NULL, updated REAL NOT NULL);""")
        row = _trial(4, score=0.5).to_row()
        del row["details"]
        row["updated"] = 0.0
        db.execute(f"INSERT INTO trials ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))
    assert inspect_journal(path) == "legacy"
    with Journal(path) as journal:
        (trial,) = journal.trials()
        journal.put(trial.evolve(details={"finished_at": 1.0}))
        assert journal.trials()[0].details == {"finished_at": 1.0}
    assert trial.details == {} and trial.score == 0.5
    assert inspect_journal(path) == "tinynas"  # adopted: stamped on its first open


def test_a_running_search_is_peeked_at_without_writing(tmp_path):
    from tinynas.study.journal import peek, progress

    path = tmp_path / "journal.sqlite"
    assert peek(path) is None and progress(path) is None  # not started yet
    with Journal(path) as journal:
        journal.put(_trial(1))
        journal.set_meta("search_seconds", 12.5)
        # Open for writing all the while, as a running study holds it: the peek still reads what is committed.
        trials, meta = peek(path, ("search_seconds", "absent"))
        assert [t.number for t in trials] == [1] and meta == {"search_seconds": 12.5}
        assert progress(path) == (1, 12.5)
        with sqlite3.connect(path) as db:  # a row that does not read as a trial: skipped, not fatal
            columns = [column[1] for column in db.execute("PRAGMA table_info(trials)")]
            row = dict(zip(columns, db.execute("SELECT * FROM trials WHERE number = 1").fetchone()))
            row.update(number=2, digest="other", architecture="{")
            db.execute(f"INSERT INTO trials ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                       tuple(row.values()))
        assert [t.number for t in peek(path)[0]] == [1]
    before = path.read_bytes()
    peek(path)
    assert path.read_bytes() == before
    for leftover in tmp_path.glob("journal.sqlite-*"):
        leftover.unlink()
    path.write_bytes(b"not a journal at all, just text" * 10)
    assert peek(path) is None and progress(path) is None
