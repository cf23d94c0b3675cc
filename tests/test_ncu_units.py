"""Numbers and units as ncu prints them -> base units as ncu_report returns them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfreport.ncu.catalog.units import decimals, parse_number, unit_scale


@pytest.mark.parametrize(("unit", "factor", "base"), [
    ("Gbyte", 1e9, "byte"), ("Gbyte/s", 1e9, "byte/s"), ("Ghz", 1e9, "hz"), ("Kbyte", 1e3, "byte"),
    ("Kbyte/block", 1e3, "byte/block"), ("Kbyte/cycle", 1e3, "byte/cycle"), ("Mbyte", 1e6, "byte"),
    ("Mbyte/s", 1e6, "byte/s"), ("Mhz", 1e6, "hz"), ("Khz", 1e3, "hz"), ("Tbyte", 1e12, "byte"),
    ("Tbyte/s", 1e12, "byte/s"), ("ms", 1e6, "ns"), ("us", 1e3, "ns"), ("s", 1e9, "ns"), ("ns", 1, "ns"),
    ("msecond", 1e6, "ns"), ("usecond", 1e3, "ns"), ("nsecond", 1, "ns"), ("second", 1e9, "ns"),
    ("sector/ns", 1e9, "sector/s"), ("sector/us", 1e6, "sector/s"), ("sector/ms", 1e3, "sector/s"),
    ("byte/second", 1, "byte/s"), ("cycle/nsecond", 1e9, "hz"), ("cycle/usecond", 1e6, "hz"),
    ("cycle/second", 1, "hz"), ("%/Kbyte", 1e3, "%/byte"), ("KB", 1e3, "byte"), ("MB", 1e6, "byte"),
    ("GB", 1e9, "byte"), ("%", 1, "%"), ("cycle", 1, "cycle"), ("inst", 1, "inst"), ("", 1, ""),
    ("register/thread", 1, "register/thread"), ("inst/cycle", 1, "inst/cycle"), ("byte/s", 1, "byte/s"),
])
def test_unit_scale(unit: str, factor: float, base: str) -> None:
    assert unit_scale(unit) == (factor, base)


@pytest.mark.parametrize(("text", "value", "places"), [
    ("1.23", 1.23, 2), ("1,935,473", 1935473.0, 0), ("2211869.712121", 2211869.712121, 6), ("0", 0.0, 0),
    ("-3.5", -3.5, 1), (" 1,024 ", 1024.0, 0), ("1,878,290.97", 1878290.97, 2), ("1.5e3", 1500.0, -2),
])
def test_parse_number_and_decimals(text: str, value: float, places: int) -> None:
    assert parse_number(text) == value and decimals(text) == places


@pytest.mark.parametrize("text", ["", "n/a", "N/A", "nan", "no data", "-", "  "])
def test_parse_number_missing(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize("text", ["65,77", "27.595.520", "1,2,3", "abc", "1_000", "PolicySpread", "1.2.3", "٣"])
def test_parse_number_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_number(text)


@given(st.text())
def test_fuzz_parse_number_only_value_error(text: str) -> None:
    try:
        result = parse_number(text)
    except ValueError:
        return
    assert result is None or isinstance(result, float)
