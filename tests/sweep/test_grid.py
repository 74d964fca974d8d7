"""A sweep's grid file: its cells, and every way it can be wrong in one line."""

import os
import subprocess
import sys

import pytest

from devtools.machine_speed import slowdown
from tinynas.errors import UsageError
from tinynas.sweep.grid import grid_from, load_grid, search_arguments

OPTIONS = ("data", "target", "seed", "budget", "strategy", "ignore_data_checks", "final-epochs", "out", "resume")


def test_cells_are_every_combination_the_last_key_fastest():
    grid = grid_from({"grid": {"target": ["A", "B"], "seed": [0, 1, 2]}, "fixed": {"budget": "1m"}}, OPTIONS)
    cells = grid.cells()
    assert len(cells) == 6 and cells[0] == {"target": "A", "seed": 0} and cells[1] == {"target": "A", "seed": 1}
    assert cells[-1] == {"target": "B", "seed": 2}
    assert search_arguments({**grid.fixed, **cells[0], "ignore_data_checks": True, "final_epochs": 3}) == [
        "--budget", "1m", "--target", "A", "--seed", "0", "--ignore-data-checks", "--final-epochs", "3"]
    assert search_arguments({"ignore_data_checks": False}) == []


def test_cells_entries_vary_together_crossed_with_the_grid():
    # A data set drawn per seed is searched with that seed only: [[cells]] couples them; [grid] crosses them all.
    table = {"cells": [{"data": "npz:s0.npz", "seed": 0}, {"data": "npz:s1.npz", "seed": 1}],
             "grid": {"strategy": ["paper", "fast"]}, "fixed": {"budget": "1m"}}
    grid = grid_from(table, OPTIONS)
    assert grid.cells() == [{"data": "npz:s0.npz", "seed": 0, "strategy": "paper"},
                            {"data": "npz:s0.npz", "seed": 0, "strategy": "fast"},
                            {"data": "npz:s1.npz", "seed": 1, "strategy": "paper"},
                            {"data": "npz:s1.npz", "seed": 1, "strategy": "fast"}]
    assert grid.varied() == ["data", "seed", "strategy"] and grid.values("seed") == [0, 1]
    assert grid.to_dict()["cells"] == table["cells"]
    only = grid_from({"cells": table["cells"]}, OPTIONS)
    assert only.cells() == table["cells"] and "cells" not in grid_from({"grid": {"seed": [0]}}, OPTIONS).to_dict()


@pytest.mark.parametrize(("table", "why"), [
    ({"grid": {"colour": ["red"]}}, "'colour' is not an option of `tinynas search`"),
    ({"grid": {}}, "the grid is empty"),
    ({"fixed": {"budget": "1m"}}, "the grid is empty"),
    ({"grid": {"seed": []}}, "grid.seed must be a non-empty list"),
    ({"grid": {"seed": 3}}, "grid.seed must be a non-empty list"),
    ({"grid": {"seed": [1, 1]}}, "names a value twice"),
    ({"grid": {"seed": [0, 1]}, "fixed": {"seed": 2}}, r"'seed' is in both \[grid\] and \[fixed\]"),
    ({"grid": {"seed": [0]}, "cells": [{"seed": 1, "data": "a"}]}, r"'seed' is in both \[grid\] and \[\[cells\]\]"),
    ({"cells": [{"data": "a", "seed": 0}, {"data": "b"}]}, "entry 2 gives data, the first data, seed"),
    ({"cells": [{"data": "a"}, {"data": "a"}]}, r"two \[\[cells\]\] entries are the same"),
    ({"cells": [{}]}, "entry 1 is empty"),
    ({"cells": {"data": "a"}}, r"cells must be \[\[cells\]\] tables"),
    ({"cells": [{"colour": "red"}]}, "'colour' is not an option"),
    ({"cells": [{"colour": [1]}]}, "'colour' is not an option"),  # the name first, then its value
    ({"cells": []}, "the grid is empty"),
    ({"cells": [{"data": [1]}]}, "cells.data must be a string"),
    ({"grid": {"seed": list(range(20))}, "cells": [{"data": str(n)} for n in range(11)]}, "220 cells"),
    ({"grid": {"out": ["x"]}}, "'out' is the sweep's own"),
    ({"grid": {"seed": [[1, 2]]}}, "must be a string, number or true/false"),
    ({"grid": {"seed": [float("nan")]}}, "must be a string, number or true/false"),
    ({"grid": {"seed": [0]}, "sweep": {}}, "unknown table 'sweep'"),
    ({"grid": {"seed": list(range(30)), "target": list("ABCDEFGH")}}, "240 cells, more than 200"),
])
def test_a_wrong_grid_is_one_line(table, why):
    with pytest.raises(UsageError, match=why) as caught:
        grid_from(table, OPTIONS)
    assert "\n" not in str(caught.value)


def test_a_grid_file_that_is_not_toml_or_not_there_is_one_line(tmp_path):
    bad = tmp_path / "grid.toml"
    bad.write_text("[grid\nseed = [0")
    with pytest.raises(UsageError, match="not a TOML grid"):
        load_grid(bad, OPTIONS)
    with pytest.raises(UsageError, match="no such grid file"):
        load_grid(tmp_path / "nothing.toml", OPTIONS)
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="cannot read the grid"):
        load_grid(bad, OPTIONS)


def _sweep(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", "sweep", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300 * slowdown())


def test_a_fifo_or_a_device_given_as_the_grid_is_refused_in_one_line(tmp_path):
    # Read plainly, a FIFO waited for a writer for ever and /dev/zero filled the memory: now the checked reader's
    # refusal, before a byte is read. A regression hangs the child, which the timeout ends, not the test run.
    os.mkfifo(tmp_path / "grid.toml")
    for grid, why in (("grid.toml", "a named pipe (FIFO), not a regular file"),
                      ("/dev/zero", "a device file, not a regular file")):
        run = _sweep(grid, "--out", "s", cwd=tmp_path)
        assert run.returncode == 2 and run.stderr == f"tinynas: error: {grid}: cannot read the grid ({why})\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["grid.toml"]  # no sweep folder


@pytest.mark.parametrize(("text", "why"), [
    ("[grid]\nseed = " + "[" * 5000 + "]" * 5000, "nested far too deep"),
    ('[grid]\ndata = ["synthetic:emg\\u0000"]', r"grid.data holds the control character '\\x00'"),
    ('[fixed]\nseed = 0\n[[cells]]\ndata = "a\\u2028b"', r"cells.data holds the control character '\\u2028'"),
    ("[grid]\nseed = [" + "9" * 5000 + "]", "a number of thousands of digits"),
    ("[grid]\nseed = [1979-05-27]", "grid.seed must be a string, number or true/false"),
])
def test_a_grid_no_search_could_take_is_one_line(tmp_path, text, why):
    (tmp_path / "grid.toml").write_text(text)
    with pytest.raises(UsageError, match=why) as caught:
        load_grid(tmp_path / "grid.toml", OPTIONS)
    assert len(str(caught.value).splitlines()) == 1
