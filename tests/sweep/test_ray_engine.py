"""The Ray engine's parts that need no cluster: the keeper of journals on the driver's disk, the journal snapshot,
what is shipped to a node, and the one-line refusals (no Ray, nobody at the address). The engine on a real
two-node cluster: test_sweep_ray.py (slow tier)."""

import socket
import sqlite3
import sys

import pytest

from tinynas.errors import MissingDependencyError, UsageError
from tinynas.study.journal import snapshot
from tinynas.sweep import ray_engine
from tinynas.sweep.ray_engine import Keeper, check_address, cpus_of


def _journal_with(path, rows):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS trials (number INTEGER PRIMARY KEY, state TEXT)")
    for number in rows:
        db.execute("INSERT INTO trials VALUES (?, 'complete')", (number,))
    return db


def _numbers(data: bytes):
    db = sqlite3.connect(":memory:")
    db.deserialize(data)
    return [row[0] for row in db.execute("SELECT number FROM trials ORDER BY number")]


def test_a_snapshot_holds_what_the_write_ahead_log_holds_while_the_search_keeps_it_open(tmp_path):
    writer = _journal_with(tmp_path / "journal.sqlite", [1, 2, 3])  # still open: the rows are in the -wal file
    assert (tmp_path / "journal.sqlite-wal").stat().st_size > 0
    assert _numbers(snapshot(tmp_path / "journal.sqlite")) == [1, 2, 3]
    writer.close()


def test_the_keeper_resumes_from_the_driver_s_journal_and_ignores_an_attempt_ray_gave_up_on(tmp_path):
    folder = tmp_path / "cell-002"
    folder.mkdir()
    writer = _journal_with(tmp_path / "journal.sqlite", [1, 2])
    for end in ("", "-wal"):  # a local engine's search killed with its rows in the write-ahead log
        (folder / f"journal.sqlite{end}").write_bytes((tmp_path / f"journal.sqlite{end}").read_bytes())
    writer.close()
    (folder / "search.log").write_text("searched here before\n")
    keeper = Keeper(str(tmp_path), {2: 1})
    (folder / "weights").mkdir()
    (folder / "weights" / "trial-2.weights.h5").write_bytes(b"w2")
    attempt, journal, files = keeper.begin(2, "a" * 56)
    assert attempt == 2 and _numbers(journal) == [1, 2] and files == {"weights/trial-2.weights.h5": b"w2"}
    assert not (folder / "journal.sqlite-wal").exists()  # folded in: a snapshot renamed over it finds no stale log
    third = _journal_with(tmp_path / "node.sqlite", [1, 2, 3])
    third.close()
    assert keeper.keep(2, 2, snapshot(tmp_path / "node.sqlite"), {"weights/trial-3.weights.h5": b"w3"}, [],
                       b"trial 3\n", 3)
    assert (folder / "weights" / "trial-3.weights.h5").read_bytes() == b"w3"
    assert _numbers((folder / "journal.sqlite").read_bytes()) == [1, 2, 3]
    # The node of attempt 2 died; Ray started attempt 3 elsewhere, and a late word from attempt 2 changes nothing.
    assert keeper.begin(2, "b" * 56)[0] == 3
    assert not keeper.keep(2, 2, b"not a journal", {"card.json": b"late"}, [], b"", 9)
    assert not (folder / "card.json").exists()
    assert _numbers((folder / "journal.sqlite").read_bytes()) == [1, 2, 3]
    # Names that would leave the folder or overwrite the journal from a file are not written.
    assert keeper.keep(2, 3, None, {"../escaped": b"x", "/tmp/abs": b"x", "journal.sqlite": b"x",
                                    "journal.sqlite-wal": b"x", "report.md": b"r"}, [], b"resumed\n", 3)
    assert not (tmp_path / "escaped").exists() and (folder / "report.md").read_bytes() == b"r"
    assert _numbers((folder / "journal.sqlite").read_bytes()) == [1, 2, 3]
    # A file the search removed on the node is removed here; a name outside the folder is not touched.
    (tmp_path / "outside").write_text("not ours")
    assert keeper.keep(2, 3, None, {}, ["report.md", "../outside", "journal.sqlite"], b"resumed\n", 3)
    assert not (folder / "report.md").exists() and (tmp_path / "outside").exists()
    assert (folder / "journal.sqlite").exists()
    log = (folder / "search.log").read_text()
    assert log.startswith("searched here before\n") and "--- attempt 2 on node aaaaaaaa ---\ntrial 3" in log
    assert log.endswith("--- attempt 3 on node bbbbbbbb ---\nresumed\n")
    assert keeper.status() == {2: {"attempt": 3, "node": "b" * 56, "trials": 3, "resumes": 3}}


def test_the_node_sends_what_changed_and_what_the_search_removed(tmp_path):
    sender = ray_engine._Sender(tmp_path)
    (tmp_path / "windows.npz").write_bytes(b"a")
    (tmp_path / "journal.sqlite").write_bytes(b"j")
    (tmp_path / ".card.json.x1.tmp").write_bytes(b"half")
    assert sender.changed() == ({"windows.npz": b"a"}, [])
    assert sender.changed() == ({}, [])
    (tmp_path / "windows.npz").unlink()
    (tmp_path / "card.json").write_bytes(b"c")
    assert sender.changed() == ({"card.json": b"c"}, ["windows.npz"])


def test_a_driver_killed_mid_write_leaves_no_temporary_file_to_a_new_attempt(tmp_path):
    folder = tmp_path / "cell-001"
    folder.mkdir()
    (folder / ".search.log.ab12.tmp").write_bytes(b"half")
    Keeper(str(tmp_path), {}).begin(1, "n" * 56)
    assert not (folder / ".search.log.ab12.tmp").exists()


def test_a_new_cell_starts_without_a_journal(tmp_path):
    assert Keeper(str(tmp_path), {}).begin(1, "n" * 56) == (1, None, {})


def test_the_files_a_cell_names_are_shipped_and_names_are_not(tmp_path):
    data = tmp_path / "windows.npz"
    data.write_bytes(b"x")
    board = tmp_path / "board.toml"
    board.write_text("")
    assert ray_engine._shipped_path(f"npz:{data}?rate=200") == ("npz:", data, "?rate=200")
    assert ray_engine._shipped_path(f"isl:{tmp_path}") == ("isl:", tmp_path, "")
    assert ray_engine._shipped_path(str(board)) == ("", board, "")
    for name in ("synthetic:emg?classes=4", "STM32F030F4P6", f"npz:{tmp_path}/missing.npz"):
        assert ray_engine._shipped_path(name) is None  # nothing to ship: a node makes it or says it is missing


def test_a_shipped_folder_is_placed_once_per_node_and_unpacked_inside_its_place(tmp_path):
    (tmp_path / "isl" / "a").mkdir(parents=True)
    (tmp_path / "isl" / "a" / "1.csv").write_text("1,2\n")
    packed = ray_engine._pack(tmp_path / "isl")
    digest = f"test{tmp_path.name}"
    placed = ray_engine._place(packed, digest, "isl")
    try:
        assert (placed / "a" / "1.csv").read_text() == "1,2\n"
        assert ray_engine._place(packed, digest, "isl") == placed
    finally:
        import shutil

        shutil.rmtree(placed.parent)


def test_a_cell_takes_its_workers_times_their_threads_and_auto_is_one():
    assert cpus_of({}) == 1 and cpus_of({"workers": "auto", "threads": 2}) == 2
    assert cpus_of({"workers": "3", "threads": 2}) == 6


def test_without_ray_the_engine_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'tinynas\[ray\]'"):
        ray_engine.import_ray()


def test_an_address_nobody_answers_at_is_one_line_at_once():
    with socket.socket() as listener:  # a port surely closed: bound, never listening
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        with pytest.raises(UsageError, match=f"127.0.0.1:{port}: no Ray cluster answers there"):
            check_address(f"127.0.0.1:{port}", timeout=2)
    for wrong in ("head", "head:port", "ray://head:10001", "10.0.0.2:70000"):
        with pytest.raises(UsageError):
            check_address(wrong)
    check_address(None)

