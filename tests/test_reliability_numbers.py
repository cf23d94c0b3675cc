"""Issue 18, units and numbers: no importer takes a unit outside its metric's dimension, a non-finite, oversized or
negative number, or a NUL past the head, silently, and none crashes on one.

Every input is a committed real export (tests/data) copied into tmp_path and mutated there. Each refusal is one
`Error:` line (exit 2, no traceback) naming the file and the metric, column or event, and the cell file written
before is byte-identical after; a unit that converts (binary byte prefixes) gives the original's numbers.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliRun, run_cli, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.bundle.layout import bundle_init
from perfreport.errors import PerfReportError
from perfreport.ncu.importer import import_ncu
from perfreport.timeshare import import_nsys, import_samples, import_torch_trace
from perfreport.timeshare.step_budget import import_step_budget

DATA = Path(__file__).parent / "data"
RAW = DATA / "h200_capture" / "run1" / "bundle" / "ncu-profiles" / "gemm_bf16_full-raw.csv"  # 1 kernel, full set
RAW_BASE = DATA / "h200_oracle" / "oracle_full-raw-base.csv"  # 6 kernels, units in base units (byte, ns)
BIG_RAW = DATA / "h200_oracle" / "oracle_full-raw.csv"  # 262 KB: rows past the first 64 KiB
DETAILS = DATA / "h200_shared" / "gemm_full-details.csv"
BIG_DETAILS = DATA / "h200_oracle" / "oracle_full-details.csv"  # 147 KB
NSYS_CSV = DATA / "nsys" / "dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv"
NSYS_GRID = DATA / "nsys" / "cudalm_nsys2022.4_gridxyz_gpukernsum.csv"
SQLITE = DATA / "nsys" / "h200_workload_as_nsys_export.sqlite"
TRACE = DATA / "torch" / "decode_steps_torch_trace.json.gz"
SAMPLES_CSV = DATA / "samples" / "zymtrace_like_gpu_kernels.csv"
SAMPLES_JSON = DATA / "samples" / "zymtrace_like_gpu_kernels.json"
DURATION = "gpu__time_duration.sum"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
HUGE = "9" * 5000  # int() refuses it (4,300 digits), float() reads it as inf
DEEP = "[" * 100_000 + "]" * 100_000


# --- helpers --------------------------------------------------------------------------------------------


def _refused(run: CliRun, *needles: str) -> str:
    """One clear error: exit 2, one 'Error:' line first, no traceback, every needle in it."""
    out = run.output
    assert run.exit_code == 2, out
    assert isinstance(run.exception, SystemExit), run.exception  # a crash would leave its exception here
    assert out.count("Error:") == 1 and "Traceback" not in out, out
    progress, _, _ = out.partition("Error: ")  # import_ncu prints "[1/1] reading F" to stderr first
    assert all(line.startswith("[") for line in progress.splitlines()), out
    for needle in needles:
        assert needle in out, (needle, out)
    return out


def _ncu(campaign: Path, path: Path, ok: bool | None = None, cell: str = "c1") -> CliRun:
    return run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", cell, "--bundle", str(path), ok=ok)


def _cell(campaign: Path, name: str = "ncu_kernels.json", cell: str = "c1") -> Path:
    return campaign / "cells" / cell / name


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode())))


def _write_rows(path: Path, rows: list[list[str]]) -> Path:
    """Write rows as ncu does (every field quoted, '\\n'): an unmutated raw page round-trips byte for byte."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_bytes(out.getvalue().encode())
    return path


def _raw_edit(src: Path, dst: Path, metric: str, unit: str | None = None, value: str | None = None) -> Path:
    """Copy a raw page with `metric`'s unit (units row) and/or its first kernel's value replaced."""
    rows = _rows(src)
    j = rows[0].index(metric)
    if unit is not None:
        rows[1][j] = unit
    if value is not None:
        rows[2][j] = value
    return _write_rows(dst, rows)


def _details_edit(src: Path, dst: Path, old: str, new: str) -> tuple[Path, int]:
    """Copy a details page with the first row holding `old` changed to `new`; return it and that row's line."""
    lines = src.read_text().split("\n")
    n = next(i for i, line in enumerate(lines) if old in line)
    lines[n] = lines[n].replace(old, new, 1)
    dst.write_text("\n".join(lines))
    return dst, n + 1


@pytest.fixture()
def imported(campaign: Path) -> tuple[Path, bytes]:
    """The campaign with RAW imported into c1, and the cell file's bytes (to compare after a refusal)."""
    _ncu(campaign, RAW, ok=True)
    return campaign, _cell(campaign).read_bytes()


# --- class 3: units outside the metric's dimension ------------------------------------------------------


@pytest.mark.parametrize("unit", ["cycle", "", "Kibyte", "furlong"])
def test_raw_duration_unit_outside_time_is_refused(imported: tuple[Path, bytes], tmp_path: Path, unit: str) -> None:
    campaign, before = imported
    bad = _raw_edit(RAW, tmp_path / "dur-unit-raw.csv", DURATION, unit=unit)
    _refused(_ncu(campaign, bad), f"{bad.name}:2", DURATION, f"unit {unit!r}", "expected ns, us, ms, s")
    assert _cell(campaign).read_bytes() == before


@pytest.mark.parametrize(("metric", "unit"), [
    (DRAM_READ, "furlong"), (DRAM_READ, "Gbyte/s"), (DRAM_WRITE, "cycle"), ("launch__grid_size", "MiB"),
    ("sm__cycles_elapsed.avg.per_second", "%"),
])
def test_raw_unit_of_another_dimension_is_refused(imported: tuple[Path, bytes], tmp_path: Path, metric: str,
                                                  unit: str) -> None:
    campaign, before = imported
    bad = _raw_edit(RAW, tmp_path / "unit-raw.csv", metric, unit=unit)
    _refused(_ncu(campaign, bad), bad.name, metric, f"unit {unit!r}")
    assert _cell(campaign).read_bytes() == before


@pytest.mark.parametrize(("unit", "factor"), [("Kibyte", 2**10), ("KiB", 2**10), ("Mibyte", 2**20), ("MiB", 2**20),
                                              ("GiB", 2**30)])
def test_binary_byte_prefix_gives_the_same_dram_bytes(tmp_path: Path, unit: str, factor: int) -> None:
    campaign = write_config(tmp_path / "camp", cells=[{"id": "c1", "description": "bytes"},
                                                     {"id": "c2", "description": "binary prefix"}])
    rows = _rows(RAW_BASE)
    for metric in (DRAM_READ, DRAM_WRITE):
        j = rows[0].index(metric)
        assert rows[1][j] == "byte"
        rows[1][j] = unit
        for row in rows[2:]:
            row[j] = repr(int(row[j].replace(",", "")) / factor)  # exact: a byte count over a power of two
    binary = _write_rows(tmp_path / "binary-raw.csv", rows)
    _ncu(campaign, RAW_BASE, ok=True, cell="c1")
    _ncu(campaign, binary, ok=True, cell="c2")
    plain, scaled = (json.loads(_cell(campaign, cell=c).read_text())["kernels"] for c in ("c1", "c2"))
    assert len(plain) == len(scaled) == 6
    for a, b in zip(plain, scaled, strict=True):
        assert a["dram_bytes"] is not None and a["dram_bytes"] > 0
        for key in ("dram_bytes", "arithmetic_intensity", "achieved_dram_tbps", "sol_pct"):
            assert b[key] == a[key], key


def test_details_binary_rate_prefix_converts(tmp_path: Path) -> None:
    campaign = write_config(tmp_path / "camp", cells=[{"id": "c1", "description": "Tbyte/s"},
                                                     {"id": "c2", "description": "Tibyte/s"}])
    old = '"Memory Workload Analysis","Memory Throughput","Tbyte/s","1.05"'
    tebi = repr(1.05e12 / 2**40)
    binary, _ = _details_edit(DETAILS, tmp_path / "tebi-details.csv", old,
                              f'"Memory Workload Analysis","Memory Throughput","Tibyte/s","{tebi}"')
    _ncu(campaign, DETAILS, ok=True, cell="c1")
    _ncu(campaign, binary, ok=True, cell="c2")
    (a,), (b,) = (json.loads(_cell(campaign, cell=c).read_text())["kernels"] for c in ("c1", "c2"))
    assert a["dram_bytes"] and b["dram_bytes"] == pytest.approx(a["dram_bytes"], rel=1e-12)


@pytest.mark.parametrize(("old", "new", "metric"), [
    ('"Duration","ms"', '"Duration","cycle"', DURATION),
    ('"Duration","ms"', '"Duration",""', DURATION),
    ('"Memory Throughput","Tbyte/s"', '"Memory Throughput","furlong/s"', "dram__bytes.sum.per_second"),
    ('"Registers Per Thread","register/thread"', '"Registers Per Thread","Kbyte"', "launch__registers_per_thread"),
])
def test_details_unit_outside_the_dimension_is_refused(imported: tuple[Path, bytes], tmp_path: Path, old: str,
                                                       new: str, metric: str) -> None:
    campaign, before = imported
    bad, line = _details_edit(DETAILS, tmp_path / "unit-details.csv", old, new)
    unit = new.split(",")[1].strip('"')
    _refused(_ncu(campaign, bad), f"{bad.name}:{line}", metric, f"unit {unit!r}")
    assert _cell(campaign).read_bytes() == before


# --- class 4: non-finite, oversized, negative numbers -----------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e400", HUGE, "-5", "-0.001"])
def test_raw_value_not_finite_or_negative_is_refused(imported: tuple[Path, bytes], tmp_path: Path, value: str) -> None:
    campaign, before = imported
    bad = _raw_edit(RAW, tmp_path / "value-raw.csv", DURATION, value=value)
    _refused(_ncu(campaign, bad), f"{bad.name}:3", DURATION, "expected a finite number >= 0",
             f"the cell holds '{value[:37]}")
    assert _cell(campaign).read_bytes() == before


@pytest.mark.parametrize("value", ["nan", "n/a", ""])
def test_raw_missing_value_is_a_documented_null(tmp_path: Path, campaign: Path, value: str) -> None:
    """ncu prints nan / n/a / nothing for a counter it could not collect: not captured, so null, never a number.
    Without gpu__time_duration the duration is the NERSC recipe's SM cycles / SM clock; without those too, null."""
    nan = _raw_edit(RAW, tmp_path / "nan-raw.csv", DURATION, value=value)
    _ncu(campaign, nan, ok=True)
    (k,) = json.loads(_cell(campaign).read_text())["kernels"]
    rows = _rows(RAW)
    col = {name: rows[2][rows[0].index(name)]
           for name in ("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second")}
    assert rows[1][rows[0].index("sm__cycles_elapsed.avg.per_second")] == "Ghz"  # cycles / GHz = ns
    assert k["duration_ns"] == pytest.approx(float(col["sm__cycles_elapsed.avg"].replace(",", ""))
                                             / float(col["sm__cycles_elapsed.avg.per_second"]), rel=1e-9)
    _raw_edit(nan, nan, "sm__cycles_elapsed.avg", value=value)  # a new version of the same source
    run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(nan), "--replace", ok=True)
    (k,) = json.loads(_cell(campaign).read_text())["kernels"]
    assert k["duration_ns"] is None and k["achieved_tflops"] is None and k["dram_bytes"] is not None


@pytest.mark.parametrize("value", ["inf", "1e400", HUGE, "-5"])
def test_details_value_not_finite_or_negative_is_refused(imported: tuple[Path, bytes], tmp_path: Path,
                                                         value: str) -> None:
    campaign, before = imported
    bad, line = _details_edit(DETAILS, tmp_path / "value-details.csv", '"Duration","ms","1.23"',
                              f'"Duration","ms","{value}"')
    _refused(_ncu(campaign, bad), f"{bad.name}:{line}", "'Duration'", DURATION, "expected a finite number >= 0")
    assert _cell(campaign).read_bytes() == before


@pytest.mark.parametrize("launch_id", [HUGE, str(2**63), "-1"])
def test_raw_launch_id_beyond_int64_is_refused(imported: tuple[Path, bytes], tmp_path: Path, launch_id: str) -> None:
    campaign, before = imported
    bad = _raw_edit(RAW, tmp_path / "id-raw.csv", "ID", value=launch_id)
    _refused(_ncu(campaign, bad), f"{bad.name}:3", "column 'ID'", "2^63-1")
    assert _cell(campaign).read_bytes() == before


def _trace_with(tmp_path: Path, name: str, dur_text: str, field: str = "dur") -> tuple[Path, int]:
    """The decode trace with its first kernel event's `field` printed as `dur_text`; return it and the index."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    i = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel" and e.get("ph") == "X")
    doc["traceEvents"][i][field] = 424242.4242  # a marker, then the mutant text in its place
    path = tmp_path / name
    path.write_text(json.dumps(doc).replace("424242.4242", dur_text, 1))
    return path, i


BAD_JSON_NUMBERS = [("NaN", "the constant NaN"), ("Infinity", "the constant Infinity"),
                    ("-Infinity", "the constant -Infinity"), ("1e400", "the number 1e400"),
                    (HUGE, "more than 4,300 digits")]


@pytest.mark.parametrize(("text", "needle"), [*BAD_JSON_NUMBERS, ("-5", "got the number -5;"),
                                              ("1e300", "below 2^63 ns")])
def test_torch_trace_bad_number_is_refused(campaign: Path, tmp_path: Path, text: str, needle: str) -> None:
    run_cli("import_torch_trace", "--campaign", str(campaign), "--cell-id", "c1", str(TRACE), ok=True)
    before = _cell(campaign, "kernel_times.json").read_bytes()
    bad, _ = _trace_with(tmp_path, "bad_trace.json", text)
    _refused(run_cli("import_torch_trace", "--campaign", str(campaign), "--cell-id", "c1", str(bad)), bad.name, needle)
    assert _cell(campaign, "kernel_times.json").read_bytes() == before


def test_json_nested_100000_deep_is_refused_by_every_json_importer(campaign: Path, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    for verb in ("import_torch_trace", "import_samples"):
        _refused(run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1", str(deep)), deep.name, "nested too deep")
    bundle = bundle_init(tmp_path, "b")
    before = (bundle / "inference_perfbench_v1.json").read_bytes()
    _refused(run_cli("import_step_budget", "--bundle", str(bundle), str(deep)), deep.name, "nested too deep")
    assert (bundle / "inference_perfbench_v1.json").read_bytes() == before
    assert not (campaign / "cells" / "c1").exists() or not any((campaign / "cells" / "c1").iterdir())


@pytest.mark.parametrize(("text", "needle", "field"), [
    *((t, n, "dur") for t, n in BAD_JSON_NUMBERS), ("-5", "expected 'ts' and 'dur' numbers", "dur"),
    ("1e300", "below 2^63 ns", "ts"),
])
def test_step_budget_bad_number_is_refused(tmp_path: Path, text: str, needle: str, field: str) -> None:
    bundle = bundle_init(tmp_path, "b")
    run_cli("import_step_budget", "--bundle", str(bundle), str(TRACE), ok=True)
    before = (bundle / "inference_perfbench_v1.json").read_bytes()
    bad, _ = _trace_with(tmp_path, "bad_steps.json", text, field)
    _refused(run_cli("import_step_budget", "--bundle", str(bundle), str(bad)), bad.name, needle)
    assert (bundle / "inference_perfbench_v1.json").read_bytes() == before


@pytest.mark.parametrize("value", ["inf", "nan", "1e400", HUGE, "-5"])
def test_nsys_csv_bad_number_is_refused(campaign: Path, tmp_path: Path, value: str) -> None:
    run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(NSYS_CSV), ok=True)
    before = _cell(campaign, "kernel_times.json").read_bytes()
    lines = NSYS_CSV.read_text().split("\n")
    fields = lines[1].split(",")
    fields[1] = value  # Total Time (ns) of the first kernel
    lines[1] = ",".join(fields)
    bad = tmp_path / "bad_cuda_gpu_kern_sum.csv"
    bad.write_text("\n".join(lines))
    _refused(run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(bad)),
             f"{bad.name}:2", "'Total Time (ns)'", value[:37])
    assert _cell(campaign, "kernel_times.json").read_bytes() == before


@pytest.mark.parametrize(("sql", "needle"), [
    ('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = 9e999 WHERE rowid = 1', "not an integer"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'early' WHERE rowid = 1", "not an integer"),
    ('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 0, "end" = 9000000000000000000', "integer overflow"),
])
def test_nsys_sqlite_bad_number_is_refused(campaign: Path, tmp_path: Path, sql: str, needle: str) -> None:
    run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(SQLITE), ok=True)
    before = _cell(campaign, "kernel_times.json").read_bytes()
    bad = tmp_path / "bad_export.sqlite"
    bad.write_bytes(SQLITE.read_bytes())
    con = sqlite3.connect(bad)
    con.execute(sql)
    con.commit()
    con.close()
    _refused(run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(bad)), bad.name, needle)
    assert _cell(campaign, "kernel_times.json").read_bytes() == before


@pytest.mark.parametrize(("row", "needle"), [
    (f"k1,{HUGE}", "samples: expected an integer >= 0"), ("k1,1e400", "samples: expected an integer >= 0"),
    ("k1,nan", "samples: expected an integer >= 0"), ("k1,-5", "samples: expected an integer >= 0, got -5"),
    (f"k1,{2**63}", "samples: expected an integer >= 0"),
])
def test_samples_csv_bad_count_is_refused(campaign: Path, tmp_path: Path, row: str, needle: str) -> None:
    run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(SAMPLES_CSV), ok=True)
    before = _cell(campaign, "kernel_samples.json").read_bytes()
    bad = tmp_path / "bad_samples.csv"
    bad.write_text(SAMPLES_CSV.read_text() + row + "\n")
    n = bad.read_text().count("\n")
    _refused(run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(bad)),
             f"{bad.name}:{n}", needle)
    assert _cell(campaign, "kernel_samples.json").read_bytes() == before


@pytest.mark.parametrize(("text", "needle"), [*BAD_JSON_NUMBERS, ("-5", "share_pct: expected a percent in [0, 100]")])
def test_samples_json_bad_number_is_refused(campaign: Path, tmp_path: Path, text: str, needle: str) -> None:
    run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(SAMPLES_JSON), ok=True)
    before = _cell(campaign, "kernel_samples.json").read_bytes()
    doc = json.loads(SAMPLES_JSON.read_text())
    assert all("share_pct" in k for k in doc["kernels"])
    doc["kernels"][1]["share_pct"] = 424242.4242
    bad = tmp_path / "bad_samples.json"
    bad.write_text(json.dumps(doc, indent=1).replace("424242.4242", text, 1))
    _refused(run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(bad)), bad.name, needle)
    assert _cell(campaign, "kernel_samples.json").read_bytes() == before


# --- class 14: a NUL byte past the first 64 KiB -----------------------------------------------------------


@pytest.mark.parametrize("src", [BIG_RAW, BIG_DETAILS], ids=["raw", "details"])
def test_ncu_csv_nul_past_the_head_is_refused_with_its_line(campaign: Path, tmp_path: Path, src: Path) -> None:
    _ncu(campaign, src, ok=True)
    before = _cell(campaign).read_bytes()
    data = src.read_bytes()
    start = data.rstrip(b"\n").rindex(b"\n") + 1  # the last kernel row: it starts past the first 64 KiB
    assert start > 65536
    name_at = data.index(b'","', data.index(b'","', data.index(b'","', data.index(b'","', start) + 3) + 3) + 3) + 3
    bad = tmp_path / f"nul-{src.name}"
    bad.write_bytes(data[:name_at + 2] + b"\x00" + data[name_at + 2:])  # inside the Kernel Name field
    line = data[:start].count(b"\n") + 1
    _refused(_ncu(campaign, bad), f"{bad.name}:{line}", "NUL byte")
    assert _cell(campaign).read_bytes() == before


@pytest.mark.parametrize("kind", ["nsys", "samples"])
def test_timeshare_csv_nul_past_the_head_is_refused_with_its_line(campaign: Path, tmp_path: Path, kind: str) -> None:
    src, verb, pad = ((NSYS_CSV, "import_nsys", "NOTICE: padding line\n") if kind == "nsys"
                      else (SAMPLES_CSV, "import_samples", "# padding comment\n"))
    padding = pad * (70_000 // len(pad))
    bad = tmp_path / ("nul_cuda_gpu_kern_sum.csv" if kind == "nsys" else "nul_samples.csv")
    text = padding + src.read_text()
    last = text.rstrip("\n").rfind("\n") + 1
    bad.write_bytes((text[:last + 3] + "\x00" + text[last + 3:]).encode())  # in the last row's first field
    line = text[:last].count("\n") + 1
    _refused(run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1", str(bad)), f"{bad.name}':{line}", "NUL")
    assert not (campaign / "cells" / "c1").exists() or not any((campaign / "cells" / "c1").iterdir())


# --- fuzz: mutations of committed inputs give a clean result or one PerfReportError ----------------------

_NUMBER = re.compile(rb"-?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
_UNIT = re.compile(rb"\b(?:ns|us|ms|byte|Kbyte|Mbyte|Gbyte|Tbyte|Gbyte/s|Tbyte/s|cycle|Ghz|Mhz|inst|warp|block)\b")
_BAD_NUMBERS = [b"inf", b"-inf", b"nan", b"NaN", b"Infinity", b"1e400", b"-5", HUGE.encode(), b"0", b"", b"1,2",
                b"-0", b"1e-400", b"18446744073709551616", b"[[[[1]]]]"]
_BAD_UNITS = [b"cycle", b"", b"Kibyte", b"MiB", b"furlong", b"s", b"%", b"Tibyte/s", b"byte/block"]


@st.composite
def _mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` after 1-3 mutations: a number or a unit replaced, a byte flipped, or the file cut."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["number", "number", "unit", "flip", "cut"]))
        pattern = {"number": _NUMBER, "unit": _UNIT}.get(kind)
        spans = [m.span() for m in pattern.finditer(data)] if pattern else []
        if spans:
            a, b = spans[draw(st.integers(0, len(spans) - 1))]
            data = data[:a] + draw(st.sampled_from(_BAD_NUMBERS if kind == "number" else _BAD_UNITS)) + data[b:]
        elif kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
        elif kind == "cut":
            data = data[:draw(st.integers(0, len(data)))]
    return data


def _clean_or_one_error(call: Callable[[], object], target: Path) -> None:
    """The call succeeds, or raises one PerfReportError and leaves `target` as it was (any other exception fails)."""
    before = target.read_bytes() if target.exists() else None
    try:
        call()
    except PerfReportError as exc:
        assert str(exc.message).strip() and "Traceback" not in exc.message
        assert (target.read_bytes() if target.exists() else None) == before


_FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@_FUZZ
@given(data=st.data())
def test_fuzz_raw_csv_import(campaign: Path, data: st.DataObject) -> None:
    path = campaign.parent / "fuzz-raw.csv"
    path.write_bytes(data.draw(_mutated(RAW.read_bytes())))
    _clean_or_one_error(lambda: import_ncu(campaign, "c1", path), _cell(campaign))


@_FUZZ
@given(data=st.data())
def test_fuzz_details_csv_import(campaign: Path, data: st.DataObject) -> None:
    path = campaign.parent / "fuzz-details.csv"
    path.write_bytes(data.draw(_mutated(DETAILS.read_bytes())))
    _clean_or_one_error(lambda: import_ncu(campaign, "c1", path), _cell(campaign))


@_FUZZ
@given(data=st.data(), src=st.sampled_from([NSYS_CSV, NSYS_GRID]))
def test_fuzz_nsys_csv_import(campaign: Path, data: st.DataObject, src: Path) -> None:
    path = campaign.parent / "fuzz_cuda_gpu_kern_sum.csv"
    path.write_bytes(data.draw(_mutated(src.read_bytes())))
    _clean_or_one_error(lambda: import_nsys(campaign, "c1", path), _cell(campaign, "kernel_times.json"))


_TRACE_JSON = gzip.decompress(TRACE.read_bytes())


@_FUZZ
@given(data=st.data())
def test_fuzz_torch_trace_import(campaign: Path, data: st.DataObject) -> None:
    path = campaign.parent / "fuzz_trace.json"
    path.write_bytes(data.draw(_mutated(_TRACE_JSON)))
    _clean_or_one_error(lambda: import_torch_trace(campaign, "c1", path), _cell(campaign, "kernel_times.json"))


@_FUZZ
@given(data=st.data(), src=st.sampled_from([SAMPLES_CSV, SAMPLES_JSON]))
def test_fuzz_samples_import(campaign: Path, data: st.DataObject, src: Path) -> None:
    path = campaign.parent / f"fuzz_samples{src.suffix}"
    path.write_bytes(data.draw(_mutated(src.read_bytes())))
    _clean_or_one_error(lambda: import_samples(campaign, "c1", path), _cell(campaign, "kernel_samples.json"))


@_FUZZ
@given(data=st.data())
def test_fuzz_step_budget_import(tmp_path: Path, data: st.DataObject) -> None:
    made = next(tmp_path.rglob("inference_perfbench_v1.json"), None)  # one bundle for all examples
    bundle = made.parent if made else bundle_init(tmp_path, "b")
    path = tmp_path / "fuzz_steps.json"
    path.write_bytes(data.draw(_mutated(_TRACE_JSON)))
    _clean_or_one_error(lambda: import_step_budget(bundle, path), bundle / "inference_perfbench_v1.json")
