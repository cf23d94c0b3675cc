"""Fast CSV path (pandas): same Capture as the strict reader on clean exports, the strict reader's error otherwise."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.errors import InputError
from perfreport.ncu.catalog.metrics import load_catalog
from perfreport.ncu.csv.common import load_table
from perfreport.ncu.csv.details import read_long
from perfreport.ncu.csv.fast import read_clean, scan_records
from perfreport.ncu.csv.raw import read_wide
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.model import Capture, KernelLaunch

DATA = Path(__file__).parent / "data"
H200 = DATA / "h200_shared"
NEEDED = frozenset(load_catalog().needed())
REAL = sorted(
    [p for d in ("h200_oracle", "h200_shared", "h200_campaign") for p in (DATA / d).glob("*.csv")]
    + [p for p in (DATA / "public_csv").iterdir() if p.suffix in (".csv", ".log")]
)
# Real files the fast path leaves to the strict reader, and why.
FALLBACK = {
    "public_cyanguwa-DeepLearningProfiling_details-page_long_ncu2020.csv": "==PROF== lines before the header",
    "public_microsoft-superbenchmark_details-page_long_sm100_ncu2025.log": "an ncu log: the table is not line 1",
}


def strict(path: Path, only: frozenset[str] | None) -> Capture:
    """The strict reader, bypassing the fast path."""
    table = load_table(path)
    return read_long(table, only) if "Metric Name" in table.header else read_wide(table, only)


def outcome(read, path: Path, only: frozenset[str] | None) -> Capture | str:  # noqa: ANN001 - a reader function
    """The Capture, or the error's type and message.

    Any exception, not only InputError: the strict reader crashes on a cell such as '0E310' (OverflowError in
    units.half_ulp), and the fast path must do exactly what it does.
    """
    try:
        return read(path, only)
    except Exception as exc:  # compared, not swallowed
        return f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"


def assert_same(fast: Capture, slow: Capture) -> None:
    """Field by field, dicts in the same order, floats bit for bit."""
    for f in dataclasses.fields(Capture):
        if f.name != "launches":
            assert getattr(fast, f.name) == getattr(slow, f.name), f.name
    assert len(fast.launches) == len(slow.launches)
    for a, b in zip(fast.launches, slow.launches, strict=True):
        for f in dataclasses.fields(KernelLaunch):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, dict):
                assert list(x.items()) == list(y.items()), (a.launch_id, f.name)
            else:
                assert x == y, (a.launch_id, f.name)


def every_key(path: Path) -> frozenset[str]:
    """Every column name and every metric key the strict reader gives without `only` (all conversions exercised)."""
    capture = strict(path, None)
    keys = {k for la in capture.launches for k in (*la.metrics, *la.text)}
    return frozenset(keys | set(load_table(path).header))


# ---------------------------------------------------------------------------------------------------------
# Real exports: identical Capture, or a documented fallback


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_exports_fast_equals_strict(path: Path) -> None:
    for only in (NEEDED, every_key(path)):
        fast = read_clean(path, only)
        if path.name in FALLBACK:
            assert fast is None
        else:
            assert fast is not None, "a clean export should take the fast path"
            assert_same(fast, strict(path, only))
        assert_same(read_csv_export(path, only), strict(path, only))


LOGS = sorted(p for d in ("h200_oracle", "h200_shared") for p in (DATA / d).glob("*.log"))


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_real_logs_fall_back(path: Path) -> None:
    """ncu logs (CSV printed while profiling, or no CSV at all): the strict reader's Capture or error."""
    assert read_clean(path, NEEDED) is None
    fast, slow = outcome(read_csv_export, path, NEEDED), outcome(strict, path, NEEDED)
    if isinstance(slow, str):
        assert fast == slow
    else:
        assert isinstance(fast, Capture)
        assert_same(fast, slow)


def test_fallback_list_is_real() -> None:
    assert set(FALLBACK) <= {p.name for p in REAL}


def test_fast_path_is_used_by_the_importer_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """read_csv_export(path, only) does not run the strict reader on a clean export."""
    import perfreport.ncu.csv.read as csv_read

    def boom(path: Path) -> None:
        raise AssertionError("strict reader used")

    monkeypatch.setattr(csv_read, "load_table", boom)
    assert read_csv_export(H200 / "gemm_full-raw.csv", NEEDED).launches[0].metrics["gpu__time_duration.sum"] == 1226400
    assert read_csv_export(H200 / "gemm_full-details.csv", NEEDED).section_set == "full"


def test_interleaved_details_rows(tmp_path: Path) -> None:
    """Kernels' rows interleaved (any order the strict reader accepts): launches, rules, merges in the same order."""
    header, *rows = (DATA / "h200_oracle" / "oracle_full-details.csv").read_text().splitlines()
    shuffled = rows[1::2] + rows[0::2]
    path = write(tmp_path, "\n".join([header, *shuffled]) + "\n")
    for only in (NEEDED, every_key(path)):
        fast = read_clean(path, only)
        assert fast is not None
        assert_same(fast, strict(path, only))


def test_raw_without_units_row(tmp_path: Path) -> None:
    header, _, row = (H200 / "attn_basic-raw.csv").read_text().splitlines()
    path = write(tmp_path, f"{header}\n{row}\n")
    fast = read_clean(path, NEEDED)
    assert fast is not None and any("no units row" in w for w in fast.warnings)
    assert_same(fast, strict(path, NEEDED))


# ---------------------------------------------------------------------------------------------------------
# Damaged or unusual files: through read_csv_export(path, only) the strict reader's message, or its Capture


def lines_of(name: str) -> list[str]:
    return (H200 / name).read_text().splitlines()


def write(tmp_path: Path, text: str | bytes, name: str = "x.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def expect_strict_error(path: Path) -> str:
    """read_csv_export with `only` falls back and raises exactly the strict reader's InputError."""
    assert read_clean(path, NEEDED) is None
    with pytest.raises(InputError) as fast_info:
        read_csv_export(path, NEEDED)
    with pytest.raises(InputError) as slow_info:
        strict(path, NEEDED)
    assert type(fast_info.value) is type(slow_info.value)
    assert fast_info.value.message == slow_info.value.message
    return str(fast_info.value.message)


def cells_of(line: str) -> list[str]:
    return next(csv.reader([line]))


def quoted(cells: list[str]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(cells)
    return out.getvalue()


def test_ragged_short_row_mid_file(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    short = quoted(cells_of(row)[:-3])  # pandas would pad it with empty fields
    msg = expect_strict_error(write(tmp_path, f"{header}\n{units}\n{short}\n{row}\n"))
    assert "x.csv:3" in msg and "563 fields, expected 566" in msg and "damaged" in msg


def test_short_row_whose_missing_cells_would_be_empty(tmp_path: Path) -> None:
    """Cut exactly where the row's trailing cells are empty anyway: still a short row for the strict reader."""
    header, units, row = lines_of("attn_basic-raw.csv")
    cells = cells_of(row)
    cells[-1] = ""
    msg = expect_strict_error(write(tmp_path, f"{header}\n{units}\n{quoted(cells[:-1])}\n{quoted(cells)}\n"))
    assert "x.csv:3" in msg and "565 fields, expected 566" in msg


@pytest.mark.parametrize("newline", ["", "\n"])
def test_truncated_last_row(tmp_path: Path, newline: str) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    half = row[: len(row) // 2]
    half = half[: half.rindex('",') + 1]  # cut mid-row, at a field boundary
    msg = expect_strict_error(write(tmp_path, f"{header}\n{units}\n{row}\n{half}{newline}"))
    assert "x.csv:4" in msg and "truncated" in msg and "expected 566" in msg


def test_truncated_inside_quotes(tmp_path: Path) -> None:
    text = (H200 / "attn_basic-raw.csv").read_text()
    msg = expect_strict_error(write(tmp_path, text[: text.index('"cudnn_generated') + 10]))
    assert "x.csv:3" in msg and "truncated" in msg


def test_garbage_in_needed_numeric_column(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    cells = cells_of(row)
    col = cells_of(header).index("gpu__time_duration.sum")
    cells[col] = "12..5x"
    msg = expect_strict_error(write(tmp_path, f"{header}\n{units}\n{quoted(cells)}\n"))
    assert "x.csv:3" in msg and f"column {col + 1}" in msg and "'12..5x'" in msg and "expected a number" in msg


def test_garbage_in_details_value(tmp_path: Path) -> None:
    lines = lines_of("gemm_full-sol.csv")
    lines[6] = lines[6].replace('"1.23"', '"1,23"')  # Duration in a European locale
    msg = expect_strict_error(write(tmp_path, "\n".join(lines) + "\n"))
    assert "x.csv:7" in msg and "'Duration'" in msg and "'1,23'" in msg


def test_duplicate_column(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = expect_strict_error(write(tmp_path, f'{header},"c2clink__enabled_mask"\n{units},""\n{row},"0"\n'))
    assert "x.csv:1" in msg and "duplicate column" in msg


def test_row_with_an_extra_field(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = expect_strict_error(write(tmp_path, f'{header}\n{units}\n{row},"extra"\n{row}\n'))
    assert "x.csv:3" in msg and "567 fields, expected 566" in msg


@pytest.mark.parametrize("damage", [
    lambda row: '"0"x' + row[3:],  # text after a closing quote in the first column
    lambda row: row + "x",  # ... in the last (unread) column
    lambda row: row.replace('","', '"x,"', 1),  # ... in the second column
])
def test_malformed_quoting(tmp_path: Path, damage) -> None:  # noqa: ANN001
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = expect_strict_error(write(tmp_path, f"{header}\n{units}\n{damage(row)}\n"))
    assert "x.csv:3" in msg and "malformed CSV row" in msg


def test_details_row_cut_before_value(tmp_path: Path) -> None:
    lines = lines_of("gemm_full-sol.csv")
    lines[3] = lines[3][: lines[3].rindex(',"cycle"')]
    msg = expect_strict_error(write(tmp_path, "\n".join(lines) + "\n"))
    assert "x.csv:4" in msg and "expected at least 15" in msg


def test_bad_launch_id(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    msg = expect_strict_error(write(tmp_path, f'{header}\n{units}\n"x"{row[3:]}\n'))
    assert "x.csv:3" in msg and "'ID' holds 'x'" in msg


def test_header_without_rows(tmp_path: Path) -> None:
    header, units, _ = lines_of("attn_basic-raw.csv")
    expect_strict_error(write(tmp_path, f"{header}\n{units}\n"))
    expect_strict_error(write(tmp_path, lines_of("gemm_full-details.csv")[0] + "\n", "d.csv"))


def minimal(text: str) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(csv.reader(text.splitlines()))
    return out.getvalue()


def same_as_strict_via_fallback(path: Path) -> Capture:
    assert read_clean(path, NEEDED) is None
    got = read_csv_export(path, NEEDED)
    assert_same(got, strict(path, NEEDED))
    return got


@pytest.mark.parametrize("name", ["attn_basic-raw.csv", "gemm_full-details.csv"])
def test_irregular_but_readable_files_fall_back(tmp_path: Path, name: str) -> None:
    """What the strict reader accepts but the fast path does not prove clean gives the strict reader's Capture."""
    text = (H200 / name).read_text()
    header, rest = text.split("\n", 1)
    first, rest = rest.split("\n", 1)
    variants = {
        "crlf.csv": text.replace("\n", "\r\n"),
        "bom.csv": "\ufeff" + text,
        "blank.csv": f"{header}\n\n{first}\n{rest}",
        "app_output.csv": f"{header}\nstep 1 loss=0.5\n{first}\n{rest}",
        "repeated_header.csv": f"{header}\n{first}\n{header}\n{rest}",
        "log.txt": f"==PROF== Connected to process 1\n{text}==PROF== Disconnected\n",
        "inner_quote.csv": text.replace("python3.12", 'py""thon', 1),
        "newline_in_field.csv": text.replace("python3.12", "py\nthon", 1),
        "minimal_quoting.csv": minimal(text),
    }
    for variant, body in variants.items():
        same_as_strict_via_fallback(write(tmp_path, body, variant))
    gz = write(tmp_path, gzip.compress(text.encode()), "x.csv.gz")
    same_as_strict_via_fallback(gz)


@pytest.mark.parametrize("byte", ["\r", "\x00"])
def test_cr_or_nul_after_the_first_scanned_chunk_falls_back(tmp_path: Path, byte: str) -> None:
    """The CR/NUL check runs per scanned chunk (1 MB): a byte deep in a multi-MB details page still falls back."""
    text = (H200 / "gemm_full-details.csv").read_text()
    header, rows = text.split("\n", 1)
    body = header + "\n" + rows * (3_500_000 // len(rows) + 1)
    assert len(body) > 3 * (1 << 20)
    cut = body.rindex("python3.12")  # in the last launch's rows, ~3 MB in
    damaged = body[:cut] + "python" + byte + "3.12" + body[cut + len("python3.12"):]
    path = write(tmp_path, damaged, "late.csv")
    assert read_clean(path, NEEDED) is None
    assert outcome(read_csv_export, path, NEEDED) == outcome(strict, path, NEEDED)
    clean = write(tmp_path, body, "clean.csv")
    fast = read_clean(clean, NEEDED)
    assert fast is not None and len(fast.launches) == len(strict(clean, NEEDED).launches)


def _big_details(kernels: int) -> str:
    """A multi-MB details page: the oracle's six full-set kernels repeated with fresh IDs (as bench_import)."""
    header, *body = (DATA / "h200_oracle" / "oracle_full-details.csv").read_text().splitlines()
    groups: dict[str, list[str]] = {}
    for line in body:
        groups.setdefault(line.split(",", 1)[0], []).append(line)
    rows = [f'"{i}"' + line[line.index(","):] for i in range(kernels) for line in list(groups.values())[i % 6]]
    return "\n".join([header, *rows]) + "\n"


def test_big_details_page_is_scanned_in_two_halves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of SPLIT_MIN or more is scanned as two halves cut after a newline: same Capture as the strict reader."""
    import perfreport.ncu.csv.fast_details as fast_details

    text = _big_details(300)
    assert len(text) > fast_details.SPLIT_MIN
    path = write(tmp_path, text, "big.csv")
    sizes: list[int] = []
    real_scan = fast_details.scan_fields

    def spy(data, check=None):  # noqa: ANN001, ANN202
        sizes.append(len(data))
        return real_scan(data, check)

    monkeypatch.setattr(fast_details, "scan_fields", spy)
    fast = read_clean(path, NEEDED)
    assert fast is not None and len(sizes) == 2 and sum(sizes) == len(text)
    assert abs(sizes[0] - sizes[1]) < 20_000  # cut at the first newline after the middle
    slow = strict(path, NEEDED)
    assert len(fast.launches) == 300 and sum(len(la.rules) for la in fast.launches) > 300
    assert_same(fast, slow)


@pytest.mark.parametrize("damage", ["non_ascii_name", "newline_in_field_at_cut", "unquoted_at_cut", "cr_at_end"])
def test_big_details_page_damaged_near_the_cut_falls_back(tmp_path: Path, damage: str) -> None:
    """What either half cannot prove (the cut inside a quoted field, a bad byte in the second half) goes strict."""
    text = _big_details(300)
    middle = text.index("\n", len(text) // 2)  # the newline the scan cuts after
    if damage == "non_ascii_name":  # valid UTF-8, but not ASCII: the strict reader decodes it
        at = text.rindex("nvjet_sm90")
        text = text[:at] + "nvjét" + text[at + 5:]
    elif damage == "newline_in_field_at_cut":  # that newline now sits inside the row's last quoted field
        start = text.rindex('"', 0, middle)
        text = text[:start] + '"x\n' + text[start + 1:]
    elif damage == "unquoted_at_cut":  # the row after the cut starts without a quote
        text = text[:middle + 1] + text[middle + 2:]
    else:
        text = text[:-1] + "\r\n"
    path = write(tmp_path, text, f"{damage}.csv")
    assert read_clean(path, NEEDED) is None
    assert outcome(read_csv_export, path, NEEDED) == outcome(strict, path, NEEDED)


def test_non_utf8_cell_falls_back(tmp_path: Path) -> None:
    header, units, row = lines_of("attn_basic-raw.csv")
    body = f"{header}\n{units}\n{row}\n".encode().replace(b"python", b"pyth\xffn", 1)
    la = same_as_strict_via_fallback(write(tmp_path, body)).launches[0]
    assert la.process_name == "pyth\ufffdn3.12"


# ---------------------------------------------------------------------------------------------------------
# The byte scan: when it accepts, csv.reader (strict) and pandas split the file into the same fields


field = st.one_of(
    st.text(alphabet="a,1 ", max_size=4).map(lambda t: f'"{t}"'),  # what ncu writes
    st.text(alphabet='"a,\n', max_size=3),  # anything else
)
record = st.lists(field, min_size=1, max_size=5).map(",".join).flatmap(
    lambda r: st.sampled_from([r, r + ","]))


@settings(max_examples=400, deadline=None)
@given(st.lists(record, min_size=1, max_size=5))
def test_scan_accepts_only_what_csv_and_pandas_split_alike(records: list[str]) -> None:
    text = "\n".join(records) + "\n"
    scanned = scan_records(text.encode())
    if scanned is None:
        return
    counts, newlines = scanned
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    assert [len(r) for r in rows] == counts.tolist()
    assert newlines.tolist() == [i for i, c in enumerate(text) if c == "\n"]  # one record per line
    assert all(line.startswith('"') for line in text.splitlines())
    if len(rows) > 1:
        width = max(counts.tolist())
        df = pd.read_csv(io.StringIO(text), header=None, skiprows=1, names=list(range(width)), dtype=object,
                         keep_default_na=False, na_filter=False)
        assert df.to_numpy().tolist() == [r + [""] * (width - len(r)) for r in rows[1:]]


def test_scan_examples() -> None:
    assert scan_records(b'"a","b"\n"1,2",""\n')[0].tolist() == [2, 2]
    assert scan_records(b'"a","b","c"\n"1","2",\n')[0].tolist() == [3, 3]  # ncu's details rows end in ','
    for bad in (b'"a","b"\n"1"x,"2"\n', b'"a","b"\n"1",,"2"\n', b'"a","b"\n"1","2\n', b'"a","b"\n"1","2"',
                b'"a"\n"1\n2"\n', b'"a"\n\n"1"\n', b'"a"\n"x""y"\n', b'"a"\n1\n', b'"a",\n,"b"\n'):
        assert scan_records(bad) is None, bad


# ---------------------------------------------------------------------------------------------------------
# Damaged real files: read_csv_export(path, only) gives what the strict reader gives, error or Capture


_SMALL = {name: (H200 / name).read_bytes() for name in ("attn_basic-raw.csv", "attn_basic-details.csv")}


@pytest.mark.parametrize("halves", [False, True], ids=["as_is", "details_in_two_halves"])
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(_SMALL)), st.data())
def test_fuzz_damaged_real_files_same_as_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, halves: bool,
                                                name: str, data: st.DataObject) -> None:
    """With `halves`, every details page is cut in two halves (SPLIT_MIN 1): the cut lands anywhere."""
    _split_every_page(monkeypatch, halves)
    _damaged_same_as_strict(tmp_path, name, data)


def _split_every_page(monkeypatch: pytest.MonkeyPatch, halves: bool) -> None:
    import perfreport.ncu.csv.fast_details as fast_details

    if halves:
        monkeypatch.setattr(fast_details, "SPLIT_MIN", 1)


def _damaged_same_as_strict(tmp_path: Path, name: str, data: st.DataObject) -> None:
    blob = bytearray(_SMALL[name])
    ends = [i + 1 for i, b in enumerate(blob) if b == ord("\n")]
    cut = data.draw(st.one_of(st.just(len(blob)), st.sampled_from(ends), st.integers(len(blob) // 2, len(blob))))
    blob = blob[:cut]
    for _ in range(data.draw(st.integers(0, 3))):
        if blob:
            pos = data.draw(st.integers(0, len(blob) - 1))
            blob[pos] = data.draw(st.sampled_from(list(b'",\n;x0.- ')))
    path = write(tmp_path, bytes(blob), name)
    fast, slow = outcome(read_csv_export, path, NEEDED), outcome(strict, path, NEEDED)
    if isinstance(slow, str):
        assert fast == slow
    else:
        assert isinstance(fast, Capture)
        assert_same(fast, slow)


_TABLES = {name: list(csv.reader((H200 / name).read_text().splitlines()))
           for name in ("attn_basic-raw.csv", "gemm_full-details.csv")}
_ALL_KEYS = {name: every_key(H200 / name) for name in _TABLES}
token = st.one_of(
    st.sampled_from(["", "n/a", "nan", "no data", "-", "inf", "1e5", "1.5E-3", "1,234", "1,23", "12..5", "0",
                     "32.00; 32.00", "ms", "us", "Kbyte/block", "furlong", "%", " 7 ", "1,234.50", "-0.0"]),
    st.text(alphabet="0123456789.,-eE+ naifx;/%", max_size=8),
)


@pytest.mark.parametrize("halves", [False, True], ids=["as_is", "details_in_two_halves"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(_TABLES)), st.data())
def test_fuzz_cells_same_as_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, halves: bool, name: str,
                                   data: st.DataObject) -> None:
    """Odd cells in a clean export (units, values, labels, ids, CC): the fast path converts them as the strict does."""
    _split_every_page(monkeypatch, halves)
    _cells_same_as_strict(tmp_path, name, data)


def _cells_same_as_strict(tmp_path: Path, name: str, data: st.DataObject) -> None:
    rows = [list(r) for r in _TABLES[name]]
    header = rows[0]
    if "Metric Name" in header:
        columns = [header.index(c) for c in ("ID", "CC", "Section Name", "Metric Name", "Metric Unit",
                                             "Metric Value", "Metric Value", "Metric Value", "Rule Name")]
    else:
        columns = [i for i, c in enumerate(header) if c in NEEDED or c == "ID"]
    for _ in range(data.draw(st.integers(1, 6))):
        r = data.draw(st.integers(1, len(rows) - 1))
        rows[r][data.draw(st.sampled_from(columns))] = data.draw(token)
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = write(tmp_path, out.getvalue(), name)
    for only in (NEEDED, _ALL_KEYS[name]):
        fast, slow = outcome(read_csv_export, path, only), outcome(strict, path, only)
        if isinstance(slow, str):
            assert fast == slow
        else:
            assert isinstance(fast, Capture)
            assert_same(fast, slow)
