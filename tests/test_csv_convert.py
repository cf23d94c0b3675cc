"""The one CSV cell converter: the raw page's plain-decimal path equals the general conversion on real cells."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from perfreport.ncu.csv.convert import Column, convert, convert_row, scale

ORACLE = Path(__file__).parent / "data" / "h200_oracle"


def test_convert_scales_to_base_units_with_the_printed_rounding() -> None:
    assert convert("1.2264", 1e6) == (1226400.0, pytest.approx(50.0))
    assert convert("1,935,473") == (1935473.0, 0.5)
    assert convert(" 3.20 ", 1e9) == (3.2e9, pytest.approx(5e6))


@pytest.mark.parametrize("text", ["", "n/a", "N/A", "nan", "no data", "-", "  "])
def test_convert_gives_none_for_no_value(text: str) -> None:
    assert convert(text, 1e3) is None


@pytest.mark.parametrize("text", ["NVIDIA H200", "32.00; 32.00", "65,77", "1.2.3"])
def test_convert_refuses_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a number"):
        convert(text)


def test_scale_names_unknown_units() -> None:
    assert scale("Gbyte/s") == (1e9, "byte/s", True)
    assert scale("ms") == (1e6, "ns", True)
    assert scale("furlong/fortnight") == (1.0, "furlong/fortnight", False)


def _oracle_rows() -> tuple[list[str], list[str], list[list[str]]]:
    with (ORACLE / "oracle_full-raw.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1], rows[2:]


def test_convert_row_equals_convert_on_every_cell_of_a_real_raw_page() -> None:
    header, units, rows = _oracle_rows()
    start = header.index("CC") + 1
    columns = [Column(header[j], j, units[j]) for j in range(start, len(header))]
    others: list[str] = []

    def other(col: Column, text: str) -> bool:
        others.append(text)
        return True

    checked = 0
    for row in rows:
        metrics: dict[str, float] = {}
        precision: dict[str, float] = {}
        absent = convert_row(columns, row[start:], metrics, precision, other)
        for col, text in zip(columns, row[start:], strict=True):
            try:
                want = convert(text.strip(), col.factor)
            except ValueError:
                assert col.name not in metrics
                continue
            if want is None:
                assert col.name in absent and col.name not in metrics
            else:
                assert (metrics[col.name], precision[col.name]) == want, (col.name, text)
                checked += 1
    assert checked > 10_000  # 7 kernels x ~2,000 numeric columns
    assert "NVIDIA H200" in others  # text cells reach the reader's handler, missing ones do not
    assert not any(t.strip().lower() in {"", "n/a", "nan"} for t in others)


def test_convert_row_remembers_plain_values_per_column() -> None:
    col = Column("gpu__time_duration.sum", 0, "ms")
    metrics: dict[str, float] = {}
    precision: dict[str, float] = {}
    for _ in range(2):
        assert convert_row([col], ["1.41"], metrics, precision, lambda c, t: False) == []
    assert metrics == {"gpu__time_duration.sum": 1410000.0}
    assert precision["gpu__time_duration.sum"] == pytest.approx(5000.0)
    assert col.memo == {"1.41": (1410000.0, pytest.approx(5000.0))}
