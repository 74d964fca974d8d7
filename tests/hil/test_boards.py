"""Board files: the built-in boards read, and a bad board file is one line naming what is wrong."""

import pytest

from tinynas.hil.board import BoardError, builtin_boards, get_board


def test_the_built_in_boards_are_two_emulated_cores_and_a_board_people_hold():
    boards = builtin_boards()
    assert {"mps2-an386", "microbit", "nrf52840-dk"} <= set(boards)
    assert boards["mps2-an386"].emulated and boards["microbit"].emulated and not boards["nrf52840-dk"].emulated
    assert boards["microbit"].counts(under_qemu=False) == "timer ticks"
    assert boards["nrf52840-dk"].counts(under_qemu=False) == "cycles"
    assert boards["mps2-an386"].counts(under_qemu=True) == "instructions"


GOOD = """name = "mine"
core = "Cortex-M4F"
cpu_flags = ["-mcpu=cortex-m4", "-mthumb"]
clock_hz = 80000000
flash = { origin = 0x08000000, length = 131072 }
ram = { origin = 0x20000000, length = 40960 }
uart = "nrf"
uart_base = 0x40002000
counter = "dwt"
counter_hz = 80000000
"""


@pytest.mark.parametrize("change, words", [
    (("uart = \"nrf\"", "uart = \"usb\""), "uart must be one of cmsdk, nrf"),
    (("counter = \"dwt\"", "counter = \"rdtsc\""), "counter must be one of"),
    (("clock_hz = 80000000", "clock_hz = 0"), "clock_hz must be a whole number from 1"),
    (("length = 40960", "length = 12"), "length must be a whole number from 1024"),
    (("cpu_flags = [\"-mcpu=cortex-m4\", \"-mthumb\"]", "cpu_flags = [\"; rm -rf /\"]"), "cpu_flags must be a list"),
    (("name = \"mine\"", ""), "name must be text"),
    # A name goes into hil_config.h, memory.ld and the manifest: nothing that closes a string or a comment, starts a
    # directive, or adds a linker command survives the reader.
    (("name = \"mine\"", 'name = "x\\"\\n#include \\"/etc/passwd"'), "is not a plain name"),
    (("name = \"mine\"", 'name = "x */ INCLUDE /etc/passwd /*"'), "is not a plain name"),
    (("name = \"mine\"", 'name = "x */ MEMORY { EXTRA (rwx) : ORIGIN = 0, LENGTH = 4K } /*"'), "is not a plain name"),
    (("name = \"mine\"", 'name = "../../etc"'), "is not a plain name"),
    (("name = \"mine\"", 'name = "' + 'a' * 49 + '"'), "is not a plain name"),
    (("\"-mthumb\"", '"-mthumb -specs=/tmp/evil.specs"'), "cpu_flags must be a list"),
])
def test_a_bad_board_file_is_one_line_naming_the_key(tmp_path, change, words):
    path = tmp_path / "board.toml"
    path.write_text(GOOD.replace(*change))
    with pytest.raises(BoardError, match=words) as caught:
        get_board(str(path))
    assert "\n" not in str(caught.value)


def test_a_good_board_file_reads_and_unreadable_ones_are_said(tmp_path):
    path = tmp_path / "board.toml"
    path.write_text(GOOD)
    assert get_board(str(path)).clock_hz == 80_000_000
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)))
    with pytest.raises(BoardError, match="is not a TOML text file"):
        get_board(str(tmp_path / "binary.toml"))
    with pytest.raises(BoardError, match="cannot read board file"):
        get_board(str(tmp_path / "missing.toml"))
    with pytest.raises(BoardError, match="unknown board 'esp32'; built-in boards: "):
        get_board("esp32")
