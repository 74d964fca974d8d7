"""The sweep's table: the mean over seeds pools what [[cells]] varies with the seed (a data set drawn per seed), and
the cheapest target is chosen per combination of the rest. The rows are given here; reading them from each cell's
card is tests/sweep/test_sweep.py's."""

import pytest

from tinynas.sweep import table
from tinynas.sweep.grid import grid_from
from tinynas.sweep.run import Sweep

OPTIONS = ("data", "target", "seed", "kernels", "budget")


def _row(values: dict, accuracy: float, ram: int) -> dict:
    return {**values, **dict.fromkeys(table.COLUMNS), "accuracy": accuracy, "hits": int(accuracy * 8), "windows": 8,
            "interval_low": 0.0, "interval_high": 1.0, "ram_bytes": 1024, "target_ram_bytes": ram,
            "target_flash_bytes": 0, "seconds": 1.0, "status": "done"}


@pytest.fixture
def written(tmp_path, monkeypatch):
    def write(grid: dict, accuracy) -> str:
        sweep = Sweep(tmp_path / "sweep", grid_from(grid, OPTIONS))
        made = [_row(cell.values, accuracy(cell.values), 2048 if cell.values.get("target") == "small" else 8192)
                for cell in sweep.cells]
        monkeypatch.setattr(table, "rows", lambda _sweep: made)
        monkeypatch.setattr(table, "plot", lambda *args: None)
        return table.write_tables(sweep, goal=0.5)
    return write


def test_a_seed_drawn_with_its_data_is_pooled_with_it(written):
    grid = {"cells": [{"data": "npz:s0.npz", "seed": 0}, {"data": "npz:s1.npz", "seed": 1}],
            "grid": {"target": ["small", "big"]}}
    text = written(grid, lambda v: {"small": 0.5, "big": 0.75}[v["target"]] + 0.125 * v["seed"])
    over = text.split("## Over seeds (each with its own data)")[1].split("##")[0]
    assert "| target | seeds | mean int8 accuracy ± sd |" in over
    assert "| small | 2 | 0.562 ± 0.088 |" in over and "| big | 2 | 0.812 ± 0.088 |" in over
    assert "- the grid: **small** (mean int8 accuracy 0.562 over 2 cell(s))" in text


def test_seeds_of_the_grid_are_pooled_per_data_set(written):
    grid = {"cells": [{"data": "npz:a.npz"}, {"data": "npz:b.npz"}], "grid": {"seed": [0, 1], "target": ["small"]}}
    text = written(grid, lambda v: 0.25 if v["data"] == "npz:a.npz" else 0.75)
    assert "## Over seeds\n" in text and "| data | target | seeds |" in text
    assert "| npz:a.npz | small | 2 | 0.250 ± 0.000 |" in text
    assert "- data=npz:a.npz: none of the targets reached 50% in every cell" in text
    assert "- data=npz:b.npz: **small**" in text
