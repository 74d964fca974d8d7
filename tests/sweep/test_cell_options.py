"""Every cell's options through `tinynas search`'s own checks before any cell runs: the same range table, budget and
target checks as the search (`searching.check_search_options`), and each value of its option's type, never read as
an option itself. Before, argparse alone looked: `epochs = 0` or an unknown target failed in cell 2 after cell 1 ran
in full, and `"--help"` as a value printed the search's help and ended the check with exit 0. The other refusals'
rows are in the bad-input table (`sweep-cell-*`)."""

import argparse
import subprocess
import sys

import pytest

from devtools.machine_speed import slowdown
from tinynas.cli.sweeping import check_cells, search_options
from tinynas.errors import UsageError
from tinynas.options import cores
from tinynas.sweep.grid import grid_from

FIXED = '[fixed]\ndata = "synthetic:emg"\ntarget = "STM32F030F4P6"\n'


def test_help_as_a_value_never_prints_the_search_s_help(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\nseed = [0, 1]\n' + FIXED + 'ignore_data_checks = "--help"\n')
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "sweep", str(grid), "--out", str(tmp_path / "s")],
                         capture_output=True, text=True, timeout=300 * slowdown())
    assert (run.returncode, run.stdout) == (2, "")  # was 0, with the search's usage on stdout
    assert run.stderr == (f"tinynas: error: {grid}: cell 1 (seed=0): [fixed] ignore_data_checks = '--help': "
                          f"--ignore-data-checks is a flag: give true or false\n")
    assert not (tmp_path / "s").exists()


def test_a_cell_the_search_would_refuse_stops_the_sweep_before_the_first_cell_runs(tmp_path, cli_in_process):
    grid = tmp_path / "grid.toml"
    grid.write_text("[grid]\nepochs = [2, 0]\n" + FIXED)
    run = cli_in_process("sweep", str(grid), "--out", str(tmp_path / "s"))
    assert run.returncode == 2 and not (tmp_path / "s").exists()
    # The search's own words for the same value: one check, two doors.
    alone = cli_in_process("search", "--data", "synthetic:emg", "--target", "STM32F030F4P6", "--epochs", "0",
                           "--out", str(tmp_path / "run"))
    said = alone.stderr.strip().removeprefix("tinynas: error: ")
    assert said.startswith("--epochs must be between 1 and")
    assert run.stderr.strip() == f"tinynas: error: {grid}: cell 2 (epochs=0): {said}"


def test_the_ray_engine_leaves_the_cores_ceiling_to_each_node_but_not_the_counts():
    parser, names = search_options()
    many = grid_from({"grid": {"seed": [0]}, "fixed": {"data": "synthetic:emg", "target": "nRF52840",
                                                       "workers": str(cores() + 1)}}, names)
    with pytest.raises(UsageError, match=r"cell 1 \(seed=0\): --workers \d+ is more than this machine's"):
        check_cells(many, parser, "grid.toml")
    check_cells(many, parser, "grid.toml", cores_here=False)  # a node of the cluster may have them
    none = grid_from({"grid": {"seed": [0]}, "fixed": {"data": "synthetic:emg", "target": "nRF52840", "workers": "0",
                                                       "threads": 1}}, names)
    for here in (True, False):
        with pytest.raises(UsageError, match="--workers must be at least 1, got 0"):
            check_cells(none, parser, "grid.toml", cores_here=here)


@pytest.mark.parametrize(("options", "why"), [
    ({"seed": "0"}, "[fixed] seed = '0': --seed takes a whole number"),
    ({"seed": 1.5}, "[fixed] seed = 1.5: --seed takes a whole number"),
    ({"learning_rate": True}, "[fixed] learning_rate = true: --learning-rate takes a value, not true/false"),
    ({"track_test": "false"}, "[fixed] track_test = 'false': --track-test is a flag: give true or false"),
    ({"test_data": "-synthetic:emg"}, "[fixed] test_data = '-synthetic:emg': a value that starts with '-'"),
    ({"strategy": "--resume"}, "a value that starts with '-' would be read as an option of `tinynas search`"),
])
def test_a_value_not_of_its_option_s_type_is_one_line_naming_the_key(options, why):
    parser, names = search_options()
    grid = grid_from({"grid": {"seed": [0]} if "seed" not in options else {"kernels": ["3"]},
                      "fixed": {"data": "synthetic:emg", "target": "nRF52840", **options}}, names)
    with pytest.raises(UsageError, match="^grid.toml: cell 1 ") as caught:
        check_cells(grid, parser, "grid.toml")
    assert why in str(caught.value)


def test_a_parser_that_would_exit_raises_instead(capsys):
    # A second guard behind the value check: had an argument still reached argparse as "--help", the sweep's check
    # would end with its one line, not the process with exit 0.
    parser, _names = search_options()
    with pytest.raises(UsageError):
        parser.parse_args(["--data", "x", "--out", "y", "--help"])
    assert isinstance(parser, argparse.ArgumentParser) and "usage: tinynas search" in capsys.readouterr().out
