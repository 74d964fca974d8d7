"""Durations, sizes and counts as people write them (`tinynas.units`, the one reader of each)."""

import pytest

from tinynas.errors import UsageError
from tinynas.units import UnitError, kib, parse_count, parse_duration, parse_size


def test_durations():
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800
    assert parse_duration("1h30m") == 5400 and parse_duration(12) == 12 and parse_duration(" 2H ") == 7200
    with pytest.raises(UnitError, match="cannot read duration"):
        parse_duration("soon")
    with pytest.raises(UnitError, match="must be positive"):
        parse_duration("0s")


def test_sizes_are_binary_multiples():
    assert parse_size("4096") == 4096
    assert parse_size("4KiB") == 4096 == parse_size("4k")
    assert parse_size("1.5M") == 1572864
    with pytest.raises(UnitError, match="cannot read"):
        parse_size("four kilobytes")
    with pytest.raises(UnitError, match="out of range"):
        parse_size("2048G", "RAM")


def test_counts_are_decimal_multiples():
    assert parse_count("1.14M") == 1_140_000 and parse_count("500k") == 500_000
    with pytest.raises(UnitError, match="MAC budget"):
        parse_count("lots", "MAC budget")
    with pytest.raises(UnitError, match="out of range"):
        parse_count("0")


def test_a_unit_error_is_a_usage_error_and_kib_reads_as_people_do():
    assert issubclass(UnitError, UsageError)
    assert kib(6 * 1024) == "6.0 KiB" and kib(1536) == "1.5 KiB"
