"""`tinynas firmware`: the test firmware's sources for a board, built with the Arm toolchain where it is installed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinynas.hil.board import builtin_boards, get_board
from tinynas.hil.build import FirmwareError, build_firmware, manifest_board, model_hash, write_firmware


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


def _tinynas(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("manifest", [
    '{"board": "microbit", "note": "my own build notes"}',  # JSON of the user's own
    '{"written_by": "tinynas firmware"}',  # ours in words only
    "not json at all",
    '{"written_by": "tinynas firmware", "board": "microbit", "model_hash": "0", "input_size": 1, "output_size": 1, '
    '"model_source": "../../etc/passwd", "files": []}',  # a tampered manifest naming a file outside
])
def test_a_folder_with_a_firmware_json_not_of_ours_is_left_alone_by_the_command(exported_tiny, tmp_path, manifest):
    """Ownership is decided by reading the manifest, not by seeing a file of that name: the user's hil_main.c stays."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "firmware.json").write_text(manifest)
    (mine / "hil_main.c").write_text("/* my own firmware */\n")
    run = _tinynas("firmware", str(_model(exported_tiny)), "--board", "microbit", "--out", str(mine), "--no-build")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert "holds files that are not a tinynas firmware" in run.stderr
    assert (mine / "hil_main.c").read_text() == "/* my own firmware */\n"
    assert (mine / "firmware.json").read_text() == manifest
    assert sorted(p.name for p in mine.iterdir()) == ["firmware.json", "hil_main.c"]


def test_a_board_files_name_cannot_reach_the_c_or_the_linker_script(exported_tiny, tmp_path):
    shipped = (Path(__file__).resolve().parents[2] / "tinynas" / "hil" / "boards" / "microbit.toml").read_text()
    evil = tmp_path / "evil.toml"
    evil.write_text(shipped.replace('name = "microbit"', 'name = "x\\"\\n#include \\"/etc/passwd"'))
    run = _tinynas("firmware", str(_model(exported_tiny)), "--board", str(evil), "--out", str(tmp_path / "fw"))
    assert run.returncode == 2 and "is not a plain name" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "fw").exists()


def test_a_board_files_firmware_keeps_its_board_when_the_file_is_gone(exported_tiny, tmp_path):
    """`hil --port` and `simulate --chip` read the board from the firmware's manifest, not from a name they would
    have to find among the built-in boards."""
    shipped = (Path(__file__).resolve().parents[2] / "tinynas" / "hil" / "boards" / "microbit.toml").read_text()
    path = tmp_path / "my-microbit.toml"
    path.write_text(shipped.replace('name = "microbit"', 'name = "my-microbit"').replace("16 KB", "my own"))
    board = get_board(str(path))
    write_firmware(_model(exported_tiny), board, tmp_path / "fw")
    path.unlink()
    assert manifest_board(tmp_path / "fw") == board
    assert manifest_board(write_firmware(_model(exported_tiny), builtin_boards()["microbit"],
                                         tmp_path / "fw2").folder) == builtin_boards()["microbit"]
    config = (tmp_path / "fw" / "hil_config.h").read_text()
    assert '#define HIL_BOARD "my-microbit"' in config


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
