"""`tinynas firmware`: the test firmware's sources for a board, built with the Arm toolchain where it is installed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinynas.hil.board import builtin_boards
from tinynas.hil.build import FirmwareError, build_firmware, model_hash, write_firmware


def _model(exported_tiny) -> Path:
    return exported_tiny[2].tflite_path.parent


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("board", sorted(builtin_boards()))
def test_the_firmware_builds_warning_free_for_every_built_in_board(exported_tiny, tmp_path, board):
    spec = builtin_boards()[board]
    firmware = build_firmware(write_firmware(_model(exported_tiny), spec, tmp_path / "fw"), spec)
    assert firmware.elf.is_file() and firmware.hex.read_text().startswith(":")  # Intel hex, for a flasher
    assert firmware.model_hash == model_hash((_model(exported_tiny) / "model_compiled.c").read_bytes())
    assert firmware.image.flash > firmware.model.flash > 0 and firmware.image.ram >= firmware.model.ram
    assert firmware.image.flash <= spec.flash_bytes and "-Werror" in firmware.build_line
    manifest = json.loads((tmp_path / "fw" / "firmware.json").read_text())
    assert manifest["board"] == board and manifest["compiler"].startswith("arm-none-eabi-gcc")


def test_a_folder_that_is_not_a_firmware_is_left_alone(exported_tiny, tmp_path):
    board = builtin_boards()["microbit"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me\n")
    with pytest.raises(FirmwareError, match="holds files that are not a tinynas firmware"):
        write_firmware(_model(exported_tiny), board, tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FirmwareError, match="is a file, not a folder"):
        write_firmware(_model(exported_tiny), board, tmp_path / "file")
    again = write_firmware(_model(exported_tiny), board, tmp_path / "fw")
    assert write_firmware(_model(exported_tiny), board, tmp_path / "fw") == again  # its own folder: rewritten


def test_without_the_toolchain_the_sources_are_written_and_the_line_says_what_to_install(exported_tiny, tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bare}"}
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "firmware", str(_model(exported_tiny)), "--board",
                          "nrf52840-dk", "--out", str(tmp_path / "fw")], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "not built: building the firmware needs arm-none-eabi-gcc" in run.stdout
    assert "apt-get install gcc-arm-none-eabi picolibc-arm-none-eabi" in run.stdout
    assert {"hil_main.c", "startup.c", "memory.ld", "hil_config.h", "model_compiled.c"} <= {
        p.name for p in (tmp_path / "fw").iterdir()}


@pytest.mark.usefixtures("arm_toolchain")
def test_the_firmware_bundle_carries_the_test_firmware_and_it_builds_as_its_readme_says(exported_tiny, tmp_path):
    import io
    import shlex
    import zipfile

    from tinynas.deploy.bundle import firmware_zip
    from tinynas.hil.build import bundle_files

    model = _model(exported_tiny)
    zipfile.ZipFile(io.BytesIO(firmware_zip(model, *bundle_files(model)))).extractall(tmp_path / "bundle")
    readme = (tmp_path / "bundle" / "README.txt").read_text()
    line = next(text for text in readme.splitlines() if text.startswith("Build: arm-none-eabi-gcc"))
    built = subprocess.run(shlex.split(line.removeprefix("Build: ")), cwd=tmp_path / "bundle", capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "bundle" / "firmware.elf").stat().st_size > 0 and "tinynas hil" in readme
