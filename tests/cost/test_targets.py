import pytest

from tinynas.cost.targets import (
    MACS_PER_COREMARK,
    TargetError,
    builtin_targets,
    get_target,
    load_target_file,
    resolve_target,
)


def test_method_targets_are_built_in_with_method_budgets():
    f030 = get_target("STM32F030F4P6")
    assert (f030.ram_bytes, f030.flash_bytes, f030.mac_budget) == (4096, 16384, 106 * MACS_PER_COREMARK)
    c011 = get_target("stm32c011f6p6")
    assert (c011.ram_bytes, c011.flash_bytes, c011.mac_budget) == (6144, 32768, 1_140_000)
    ispu = get_target("LSM6DSO16IS")
    assert (ispu.ram_bytes, ispu.flash_bytes) == (8192, 32768)


def test_popular_boards_are_built_in():
    names = {t.name for t in builtin_targets().values()}
    assert {"nRF52840", "RP2040", "ESP32-S3"} <= names
    assert all(t.source for t in builtin_targets().values())


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(TargetError, match="unknown target 'stm32h7'.*STM32F030F4P6"):
        get_target("stm32h7")


def test_user_target_file(tmp_path):
    path = tmp_path / "board.toml"
    path.write_text('name = "MyBoard"\nram_bytes = 10240\nflash_bytes = 65536\ncoremark = 50\n')
    board = load_target_file(path)
    assert board.mac_budget == 500_000
    assert get_target(str(path)) == board


@pytest.mark.parametrize("text, message", [
    ('name = "x"\nram_bytes = 0\nflash_bytes = 10\nmac_budget = 5\n', "ram_bytes must be a positive integer"),
    ('name = "x"\nram_bytes = 10\nflash_bytes = 10\n', "give 'mac_budget' or 'coremark'"),
    ('name = "x"\nram_bytes = 10\nflash_bytes = 10\nmac_budget = 5\nspeed = 3\n', "unknown key"),
    ('name = "x\n', "not valid TOML"),
])
def test_bad_target_files_give_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TargetError, match=message) as info:
        load_target_file(path)
    assert "\n" not in str(info.value).strip()


def test_command_line_budgets():
    custom = resolve_target(ram="6KiB", flash="32k", macs="1.5M")
    assert (custom.ram_bytes, custom.flash_bytes, custom.mac_budget) == (6144, 32768, 1_500_000)
    overridden = resolve_target("STM32F030F4P6", ram="8k")
    assert overridden.ram_bytes == 8192 and overridden.flash_bytes == 16384
    with pytest.raises(TargetError, match="give --target NAME, or all of"):
        resolve_target(ram="4k")
    with pytest.raises(TargetError, match="RAM '0' is out of range"):
        resolve_target(ram="0", flash="1k", macs="1k")
    with pytest.raises(TargetError, match="must be a positive integer"):
        resolve_target(ram=0, flash="1k", macs="1k")


@pytest.mark.parametrize("kwargs, message", [
    ({"ram": "99999999G"}, "RAM '99999999G' is out of range"),
    ({"flash": "0.1"}, "flash '0.1' is out of range"),
    ({"macs": "0"}, "MAC budget '0' is out of range"),
    ({"macs": "9999999G"}, "MAC budget '9999999G' is out of range"),
    ({"ram": 1 << 50}, "ram_bytes 1,125,899,906,842,624 is out of range"),
])
def test_absurd_budgets_are_refused_before_they_reach_the_journal(kwargs, message):
    with pytest.raises(TargetError, match=message):
        resolve_target("STM32F030F4P6", **kwargs)


@pytest.mark.parametrize("coremark", ['"fast"', "-3", "true"])
def test_a_coremark_that_is_not_a_positive_number_is_one_line(tmp_path, coremark):
    path = tmp_path / "board.toml"
    path.write_text(f'name = "b"\nram_bytes = 6144\nflash_bytes = 32768\ncoremark = {coremark}\n')
    with pytest.raises(TargetError, match="'coremark' must be a positive number"):
        load_target_file(path)


@pytest.mark.parametrize("content, message", [
    (b"\xd3\x00\xff binary", "is not a TOML text file"),
    (b'name = ["x"]\nram_bytes = 1024\nflash_bytes = 1024\nmac_budget = 1000\n', "'name' must be a string"),
    (b'name = "x"\nram_bytes = 1024\nflash_bytes = 1024\nmac_budget = 1000\nclock_mhz = "fast"\n',
     "'clock_mhz' must be a number of MHz above 0"),
])
def test_a_target_file_of_the_wrong_kind_is_one_line(tmp_path, content, message):
    path = tmp_path / "board.toml"
    path.write_bytes(content)
    with pytest.raises(TargetError, match=message):
        load_target_file(path)
