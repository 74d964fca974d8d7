"""`--resume` reads sweep.json as untrusted input: what the sweep wrote reads back whole (its largest possible state
included), and a damaged or edited file is one line naming it before anything runs or is written; a cell's folder is
always `cell-NNN` of its place in the list, inside the sweep's folder. Each damage's own row is in the bad-input
table (tests/support/bad_inputs.py, `sweep-resume-*`)."""

import json
import re
import subprocess
import sys

import pytest

from devtools.machine_speed import slowdown
from tinynas.errors import UsageError
from tinynas.sweep.grid import grid_from
from tinynas.sweep.run import Sweep, last_error
from tinynas.sweep.state import MAX_ERROR, STATE, DamagedState, one_line, read_state

OPTIONS = ("data", "target", "seed", "budget", "epochs")
TABLE = {"grid": {"seed": [0, 1, 2]}, "fixed": {"data": "synthetic:emg", "target": "STM32F030F4P6"}}
GRID = '[grid]\nseed = [0, 1, 2]\n[fixed]\ndata = "synthetic:emg"\ntarget = "STM32F030F4P6"\n'


def _snapshot(root):
    return {str(path.relative_to(root)): (path.is_symlink(), path.read_bytes() if path.is_file() else None)
            for path in sorted(root.rglob("*"))}


def test_what_the_sweep_wrote_reads_back_whole(tmp_path):
    grid = grid_from(TABLE, OPTIONS)
    sweep = Sweep(tmp_path / "s", grid)
    first, second, third = sweep.cells
    first.status, first.seconds, first.attempts = "done", 61.5, 1
    second.status, second.error, second.attempts, second.node = "failed", one_line("ended\x1b[31m badly\x00"), 2, \
        "a1" * 28
    third.status, third.attempts = "running", 1
    sweep.save()
    assert read_state(tmp_path / "s", grid) == sweep.cells
    assert second.error == "ended?[31m badly?"  # a log's escape codes and NUL never reach the file or the table


def test_the_largest_state_a_grid_can_reach_is_within_the_reader_s_limit(tmp_path):
    grid = grid_from(TABLE, OPTIONS)
    sweep = Sweep(tmp_path / "s", grid)
    for cell in sweep.cells:  # every error as long as it can be, in characters JSON writes at their widest
        cell.status, cell.seconds, cell.attempts, cell.node = "failed", 1e9, 1_000_000, "f" * 64
        cell.error = one_line("\U0001F4A5" * 1000, MAX_ERROR)
    sweep.save()
    assert read_state(tmp_path / "s", grid) == sweep.cells


def test_a_search_s_last_error_is_recorded_as_one_line(tmp_path):
    log = tmp_path / "search.log"
    log.write_bytes(b"epoch 1\ntinynas: error: the data \x1b[1mvanished\x1b[0m\x07\nbye\n")
    assert last_error(log) == "tinynas: error: the data ?[1mvanished?[0m?"


@pytest.mark.parametrize(("change", "why"), [
    (lambda cells: cells[1].update(index="../.."), "cell 2's index must be 2"),
    (lambda cells: cells[2].update(index=2), "cell 3's index must be 3 (its place in the list), got 2"),
    (lambda cells: cells[0].update(index=1.0), "cell 1's index must be 1"),
    (lambda cells: cells[0].update(values={"seed": 0, "data": "npz:/etc/shadow"}), "cell 1's options are not the "
                                                                                   "grid's"),
    (lambda cells: cells.reverse(), "cell 1's index must be 1"),
])
def test_no_cell_s_folder_follows_from_the_file(tmp_path, change, why):
    grid = grid_from(TABLE, OPTIONS)
    Sweep(tmp_path / "s", grid)
    state = json.loads((tmp_path / "s" / STATE).read_text())
    change(state["cells"])
    (tmp_path / "s" / STATE).write_text(json.dumps(state))
    with pytest.raises(DamagedState, match=re.escape(why)) as caught:
        read_state(tmp_path / "s", grid)
    assert str(caught.value).startswith(f"{tmp_path / 's' / STATE}: ") and "\n" not in str(caught.value)


def test_a_cell_folder_that_leads_elsewhere_is_refused_and_left_alone(tmp_path):
    grid = grid_from(TABLE, OPTIONS)
    Sweep(tmp_path / "s", grid)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "s" / "cell-003").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DamagedState, match="cell-003: not the cell's own folder"):
        read_state(tmp_path / "s", grid)
    (tmp_path / "s" / "cell-003").unlink()
    (tmp_path / "s" / "cell-003").write_text("a file where the cell's folder goes")
    with pytest.raises(DamagedState, match="cell-003: not the cell's own folder"):
        read_state(tmp_path / "s", grid)


def test_a_state_of_another_grid_is_refused_as_before(tmp_path):
    Sweep(tmp_path / "s", grid_from(TABLE, OPTIONS))
    other = grid_from({**TABLE, "grid": {"seed": [0, 1, 3]}}, OPTIONS)
    with pytest.raises(UsageError, match="holds a sweep of another grid"):
        read_state(tmp_path / "s", other)
    retyped = grid_from({**TABLE, "grid": {"seed": [0, 1, 2]}, "fixed": {**TABLE["fixed"], "epochs": 1}}, OPTIONS)
    with pytest.raises(UsageError, match="holds a sweep of another grid"):
        read_state(tmp_path / "s", retyped)


def test_the_real_command_refuses_an_edited_state_in_one_line_and_runs_nothing(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    Sweep(tmp_path / "s", grid_from(TABLE, OPTIONS))
    state = json.loads((tmp_path / "s" / STATE).read_text())
    state["cells"][0].update(index="../../escaped")  # was a traceback; a folder outside the sweep's, had it run
    state["cells"][1].update(index=3)  # two cells of one index: one folder searched twice
    (tmp_path / "s" / STATE).write_text(json.dumps(state))
    before = _snapshot(tmp_path)
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "sweep", str(grid), "--out", str(tmp_path / "s"),
                          "--resume"], capture_output=True, text=True, timeout=300 * slowdown())
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0] == (f"tinynas: error: {tmp_path / 's' / STATE}: cell 1's index must be 1 (its place in the list), "
                        f"got '../../escaped': not the state this sweep wrote (damaged or edited?): restore the file, "
                        f"or start the sweep again in a new --out")
    assert _snapshot(tmp_path) == before  # nothing written, nothing searched


def test_an_error_recorded_with_an_escape_code_is_shown_harmless_not_refused(tmp_path):
    grid = grid_from(TABLE, OPTIONS)
    sweep = Sweep(tmp_path / "s", grid)
    sweep.cells[0].status, sweep.cells[0].error = "failed", "tinynas: error: \x1b[31mno data\x1b[0m"
    sweep.save()  # as the sweep wrote a search's last error before it passed through one_line
    assert read_state(tmp_path / "s", grid)[0].error == "tinynas: error: ?[31mno data?[0m"
    for split in ("one\ntwo", "one\r", "one\u2028two", "one\x1ctwo"):  # a second line is not a cell's error
        sweep.cells[0].error = split
        sweep.save()
        with pytest.raises(DamagedState, match="cell 1's error must be one line"):
            read_state(tmp_path / "s", grid)
