import json
import subprocess
import sys

import pytest


def tinynas(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True)


def test_cost_json_is_clean_and_complete():
    run = tinynas("cost", "--input", "400x8", "--classes", "26", "--k", "4", "--c", "3", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    for key in ("macs", "params", "flash_bytes", "peak_ram_bytes"):
        assert isinstance(result[key], int) and result[key] > 0


def test_cost_from_architecture_file_with_target(tmp_path):
    from tinynas.space import Architecture

    path = tmp_path / "arch.json"
    path.write_text(Architecture(512, 1, 10, k=2, c=1).to_json())
    run = tinynas("cost", "--arch", str(path), "--target", "STM32F030F4P6", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["fits"] is True


@pytest.mark.parametrize("args, message", [
    (("cost", "--input", "400x8", "--classes", "26", "--k", "0", "--c", "3"), "k (stem filters) must be >= 1"),
    (("cost", "--input", "400by8", "--classes", "26", "--k", "1", "--c", "3"), "--input must look like 400x8"),
    (("cost", "--input", "16x1", "--classes", "2", "--k", "1", "--c", "5"), "too many for 16 samples"),
    (("cost", "--input", "400x8", "--classes", "26", "--k", "1", "--c", "1", "--target", "nope"), "unknown target"),
    (("cost", "--input", "400x8", "--classes", "26", "--k", "1", "--c", "1", "--ram", "-3", "--flash", "1k",
      "--macs", "1k"), "cannot read RAM"),
    (("measure", "does-not-exist.tflite"), "cannot read"),
])
def test_errors_are_one_line(args, message):
    run = tinynas(*args)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinynas: error:") and message in lines[0], run.stderr


def test_targets_lists_method_boards():
    run = tinynas("targets", "--json")
    assert run.returncode == 0
    names = {t["name"] for t in json.loads(run.stdout).values()}
    assert {"STM32F030F4P6", "STM32C011F6P6", "LSM6DSO16IS"} <= names


def test_measure_json_keys(exported_tiny, tflite_micro):
    _, tflite, paths = exported_tiny
    run = tinynas("measure", str(paths.tflite_path), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["flash_bytes"] == len(tflite)
    assert result["arena_bytes"] == result["arena_head_bytes"] + result["arena_tail_bytes"]


@pytest.mark.parametrize("args, message", [
    (("search", "--data", "synthetic:sound", "--target", "STM32F030F4P6", "--out", "x"), "unknown synthetic set"),
    (("search", "--data", "synthetic:emg?classes=26&length=800", "--target", "STM32F030F4P6", "--out", "x"),
     "cannot hold even the smallest network"),
    (("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out", "x", "--runtime", "tflm"),
     "target STM32F030F4P6 cannot hold TFLite Micro: its code takes"),
    (("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out", "x", "--budget", "soon"),
     "cannot read duration"),
    (("search", "--data", "synthetic:vibration", "--out", "x"), "give --target NAME"),
])
def test_search_errors_are_one_line(tmp_path, args, message):
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], run.stderr


def test_data_inspect_prints_classes_counts_and_split():
    run = tinynas("data", "inspect", "synthetic:emg?classes=3&windows_per_class=15&seed=1", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["counts"] == {"A": 15, "B": 15, "C": 15}
    assert summary["window_length"] == 400 and summary["channels"] == 8 and summary["sample_rate_hz"] == 200
    assert summary["split"]["protocol"].startswith("by recording group")
    text = tinynas("data", "inspect", "synthetic:vibration?windows_per_class=12&seed=1").stdout
    assert "inner_race" in text and "12000 Hz" in text
    assert "split     impossible: class 'normal' has 2 recording group(s)" in text


def test_data_inspect_bad_path_is_one_line(tmp_path):
    run = tinynas("data", "inspect", f"isl:{tmp_path}")
    assert run.returncode == 2 and "is not the ISL layout" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_help_and_version_still_exit_0():
    assert tinynas("search", "--help").returncode == 0
    run = tinynas("--version")
    assert run.returncode == 0 and run.stdout.startswith("tinynas ")


def test_explicit_zero_is_refused_not_read_as_unset(tmp_path):
    # `--epochs 0` used to train the strategy's default of 100 epochs.
    for option in ("--epochs", "--batch-size", "--learning-rate", "--final-epochs"):
        run = subprocess.run([sys.executable, "-m", "tinynas.cli", "search", "--data", "synthetic:vibration",
                              "--target", "STM32F030F4P6", "--out", "run", option, "0"],
                             capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 2 and run.stderr.startswith(f"tinynas: error: {option} must be"), run.stderr
    assert list(tmp_path.iterdir()) == []


def test_cost_with_the_c_runtime_shows_its_budget():
    arch = ("cost", "--input", "512x1", "--classes", "10", "--k", "4", "--c", "2", "--target", "STM32F030F4P6")
    result = json.loads(tinynas(*arch, "--runtime", "c", "--json").stdout)
    assert result["runtime"] == "c" and result["fits"] is True and result["arena_tail_bytes"] == 0
    c = result["c_runtime"]
    assert result["peak_ram_bytes"] == c["ram_bytes"] == c["arena_bytes"] + c["io_bytes"] + c["stack_bytes"]
    assert result["flash_bytes"] == c["flash_bytes"] == c["tables_bytes"] + c["code_bytes"]
    assert json.loads(tinynas(*arch, "--json").stdout)["runtime_choice"]["runtime"] == "c"  # auto, the default
    tflm = json.loads(tinynas(*arch, "--runtime", "tflm", "--json").stdout)
    assert tflm["runtime"] == "tflm" and tflm["fits"] is False and "c_runtime" not in tflm
    text = tinynas(*arch, "--runtime", "c").stdout
    assert "C runtime on ilp32: arena" in text and "input/output" in text and "stack" in text
    assert "C runtime: tables" in text and "code" in text and "target STM32F030F4P6: fits" in text
    assert "(TFLite Micro, ilp32)" in tinynas(*arch, "--runtime", "tflm").stdout


@pytest.mark.parametrize("args, message", [
    (("cost", "--input", "512x1", "--classes", "10", "--k", "2", "--c", "1", "--runtime", "tvm"),
     "argument --runtime: invalid choice: 'tvm'"),
    (("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out", "x", "--runtime", "C"),
     "argument --runtime: invalid choice: 'C'"),
    (("cost", "--input", "512x1", "--classes", "10", "--k", "2", "--c", "1", "--runtime", "c", "--abi", "lp64"),
     "the C runtime is budgeted for 32-bit microcontrollers (abi ilp32) only"),
])
def test_a_bad_runtime_is_one_line_exit_2(tmp_path, args, message):
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinynas: error:") and message in lines[0], run.stderr
    assert list(tmp_path.iterdir()) == []


def test_search_help_says_what_runtime_does():
    text = " ".join(tinynas("search", "--help").stdout.split())
    assert "what runs the model on the chip, and so what the budget counts: c (tinynas's generated C" in text
    assert "auto (default: c where the target can run it" in text
    assert "method (the method's tool: the 64-bit host arena rounded up to 512 B" in text


@pytest.mark.slow
def test_a_search_budgeted_for_the_c_runtime_fits_where_tflite_micro_cannot(tmp_path):
    import sqlite3

    from tinynas.cost.estimate import estimate
    from tinynas.space import Architecture

    data = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
    # RAM for the C runtime's A(3,0) on these 64x1 windows (a few hundred bytes, its stack measured on the
    # ARM build): TFLite Micro's arena alone needs 1.5 KiB for the smallest network.
    ram = estimate(Architecture(64, 1, 4, k=3, c=0), runtime="c").peak_ram_bytes
    assert ram < estimate(Architecture(64, 1, 4, k=1, c=0), accounting="arena").peak_ram_bytes
    search = ("search", "--data", data, "--ram", str(ram), "--flash", "64k", "--macs", "600", "--budget", "5m",
              "--epochs", "2", "--learning-rate", "0.003", "--final-epochs", "2")
    refused = tinynas(*search, "--out", str(tmp_path / "tflm"), "--runtime", "tflm", "--accounting", "arena")
    assert refused.returncode == 2 and "cannot hold even the smallest network" in refused.stderr
    refused = tinynas(*search, "--out", str(tmp_path / "tflm"), "--runtime", "tflm")  # the interpreter, too
    assert refused.returncode == 2 and "cannot hold TFLite Micro: its static RAM and stack take" in refused.stderr
    run = tinynas(*search, "--out", str(tmp_path / "c"), "--json")  # --runtime auto, the default
    assert run.returncode == 0, run.stderr
    card = json.loads(run.stdout)
    assert card["runtime"] == "c" and card["cost_estimate"]["runtime"] == "c"
    assert card["runtime_choice"]["reason"].startswith("auto: it runs on any 32-bit microcontroller")
    assert card["cost_estimate"]["peak_ram_bytes"] <= ram
    assert json.loads((tmp_path / "c" / "card.json").read_text())["runtime"] == "c"
    with sqlite3.connect(tmp_path / "c" / "journal.sqlite") as db:
        costs = [json.loads(row[0]) for row in db.execute("SELECT costs FROM trials")]
        settings = json.loads(db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()[0])
    assert costs and {cost["runtime"] for cost in costs} == {"c"}
    assert settings["runtime"] == "c"
    assert "C runtime" in (tmp_path / "c" / "report.md").read_text()
