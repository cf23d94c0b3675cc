"""ncu CSV readers: real H200 exports, public exports from other ncu versions, framing, fuzzing."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.errors import InputError
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.model import Capture, Rule

DATA = Path(__file__).parent / "data"
H200 = DATA / "h200_shared"
PUBLIC = DATA / "public_csv"
ORACLE = DATA / "h200_oracle"
FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC"]


def read(name: str) -> Capture:
    return read_csv_export(H200 / name)


def only(capture: Capture):  # noqa: ANN201 - test helper
    assert len(capture.launches) == 1
    return capture.launches[0]


def lines_of(name: str) -> list[str]:
    return (H200 / name).read_text().splitlines()


def write(tmp_path: Path, text: str, name: str = "x.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------------------
# Real H200 exports (ncu 2025.3.1)


def test_raw_gemm_values_in_base_units() -> None:
    capture = read("gemm_full-raw.csv")
    la = only(capture)
    m, u, p = la.metrics, la.units, la.precision
    assert m["gpu__time_duration.sum"] == 1226400.0 and u["gpu__time_duration.sum"] == "ns"  # 1.226400 ms
    assert p["gpu__time_duration.sum"] == pytest.approx(0.5)
    assert m["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] == 966367641600
    assert m["dram__bytes_read.sum"] == pytest.approx(1054471000, abs=500)  # 1.054471 Gbyte
    assert u["dram__bytes_read.sum"] == "byte" and p["dram__bytes_read.sum"] == pytest.approx(500)
    assert m["derived__lts__lts2xbar_bytes.sum.per_second"] == pytest.approx(4.928082e12)  # "Tbyte" quirk
    assert u["derived__lts__lts2xbar_bytes.sum.per_second"] == "byte"
    assert m["launch__shared_mem_per_block_dynamic"] == 188636 and u["launch__shared_mem_per_block_dynamic"] \
        == "byte/block"
    assert m["lrc__ilc_input_sectors.sum.per_second"] == pytest.approx(5.985847e9)
    assert u["lrc__ilc_input_sectors.sum.per_second"] == "sector/s"
    assert u["gpc__cycles_elapsed.avg.per_second"] == "hz"
    assert m["derived__pct_occupancy_per_shared_mem_size"] == 8190 and u[
        "derived__pct_occupancy_per_shared_mem_size"] == "%/byte"
    assert m["launch__stack_size"] == 1024 and p["launch__stack_size"] == 0.5  # "1,024"
    assert "sass__inst_executed_register_spilling_mem_local" not in m  # "no data"
    assert "derived_tempMetric4" not in m  # "nan"
    assert la.text["launch__cluster_scheduling_policy"] == "PolicySpread"
    assert set(u) == set(m) | set(la.text)


def test_raw_gemm_provenance_and_identity() -> None:
    capture = read("gemm_full-raw.csv")
    la = only(capture)
    assert capture.source_format == "csv-raw"
    assert capture.sha256 == hashlib.sha256((H200 / "gemm_full-raw.csv").read_bytes()).hexdigest()
    assert capture.ncu_version is None and capture.gpu == "NVIDIA H200"
    assert capture.section_set == "full" and capture.sections == [] and capture.warnings == []
    assert (la.launch_id, la.name, la.function) == (0, "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT",
                                                    "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT")
    assert (la.cc, la.block_size, la.grid_size, la.device, la.stream, la.process_name) == (
        "9.0", "(384, 1, 1)", "(2, 66, 1)", "0", "7", "python3.12")
    assert la.nvtx is None and len(la.metrics) == 2207


def test_raw_attn_basic_has_no_flop_counters() -> None:
    capture = read("attn_basic-raw.csv")
    la = only(capture)
    assert capture.section_set == "basic"
    assert la.metrics["gpu__time_duration.sum"] == 162752.0  # 162.752 us
    assert not any(k.startswith("sm__ops_path_tensor") for k in la.metrics)


@pytest.mark.parametrize(("raw_file", "packed"), [
    (H200 / "gemm_full-raw.csv", H200 / "gemm_full.ncu-rep.gz"),
    (H200 / "attn_basic-raw.csv", H200 / "attn_basic.ncu-rep.gz"),
    (ORACLE / "oracle_full-raw.csv", ORACLE / "oracle_full.ncu-rep.gz"),
])
def test_raw_matches_ncu_report(raw_file: Path, packed: Path, tmp_path: Path) -> None:
    """Every raw-page value, scaled to base units, equals what NVIDIA's ncu_report returns for the report."""
    import ncu_report

    rep = tmp_path / packed.stem
    with gzip.open(packed) as src, rep.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    actions = ncu_report.load_report(str(rep)).range_by_idx(0)
    checked = 0
    for la in read_csv_export(raw_file).launches:
        act = actions.action_by_idx(la.launch_id)
        for key, value in la.metrics.items():
            metric = act.metric_by_name(key)
            assert metric is not None, key
            if metric.value() < 0 and value == 0:
                continue  # a negative counter (-6 sectors) that auto-unit CSV printed as 0
            assert value == pytest.approx(metric.value(), abs=la.precision[key] * (1 + 1e-9), rel=1e-15), key
            # the CSV prints no unit for idc__requests.sum (ncu_report: "request"); ncu_report's unit of some
            # derived__* metrics changes once another report was loaded in the process ("thread" -> "inst")
            if key != "idc__requests.sum" and not key.startswith("derived__"):
                assert la.units[key] == metric.unit(), key
            checked += 1
        for key, value in la.text.items():
            assert act.metric_by_name(key).value() == value
    assert checked > 500


@pytest.mark.parametrize(("details_file", "raw_file", "mapped"), [
    (H200 / "gemm_full-details.csv", H200 / "gemm_full-raw.csv", 83),
    (H200 / "gemm_full-sol.csv", H200 / "gemm_full-raw.csv", 10),
    (H200 / "attn_basic-details.csv", H200 / "attn_basic-raw.csv", 46),
    (H200 / "attn_basic-sol.csv", H200 / "attn_basic-raw.csv", 10),
    (ORACLE / "oracle_full-details.csv", ORACLE / "oracle_full-raw.csv", 498),
    (ORACLE / "oracle_full-details.csv", ORACLE / "oracle_full-raw-base.csv", 498),
    (ORACLE / "oracle_basic-details.csv", ORACLE / "oracle_basic-raw.csv", 276),
])
def test_details_labels_match_raw_page(details_file: Path, raw_file: Path, mapped: int) -> None:
    """Each (section, label) row, scaled to base units, equals the mapped raw metric within its rounding."""
    raw = {la.launch_id: la for la in read_csv_export(raw_file).launches}
    checked = 0
    for details in read_csv_export(details_file).launches:
        other = raw[details.launch_id]
        assert details.name == other.name
        assert [k for k in details.metrics if k.startswith("details::")] == []  # every label is mapped
        for key, value in details.metrics.items():
            assert key in other.metrics, key
            tolerance = details.precision[key] + other.precision[key]
            assert abs(value - other.metrics[key]) <= tolerance * (1 + 1e-9), (key, value, other.metrics[key])
            assert details.units[key] == other.units[key], key
            checked += 1
        for key, value in details.text.items():
            assert other.text[key] == value
    assert checked == mapped


def test_raw_auto_units_equal_base_units() -> None:
    """`--print-units auto` and `--print-units base` exports of one report give the same base values."""
    auto = read_csv_export(ORACLE / "oracle_full-raw.csv").launches
    base = read_csv_export(ORACLE / "oracle_full-raw-base.csv").launches
    checked = 0
    for a, b in zip(auto, base, strict=True):
        assert a.metrics.keys() == b.metrics.keys() and a.units == b.units
        for key, value in a.metrics.items():
            if key == "lts__t_sectors_srcunit_tex_aperture_device_op_red_lookup_miss.sum" and b.metrics[key] < 0:
                continue  # ncu printed 0 in auto mode and -6 in base mode for this counter
            assert abs(value - b.metrics[key]) <= (a.precision[key] + b.precision[key]) * (1 + 1e-9), key
            checked += 1
    assert checked > 13000


def test_printed_raw_log() -> None:
    """`ncu --csv --page raw` printed while profiling: warnings and app output before the table."""
    capture = read_csv_export(ORACLE / "oracle_add_basic-printed-raw.log")
    assert capture.section_set == "basic" and only(capture).function == "vectorized_elementwise_kernel"


def test_details_gemm_structure() -> None:
    capture = read("gemm_full-details.csv")
    la = only(capture)
    assert capture.source_format == "csv-details" and capture.section_set == "full" and capture.gpu is None
    assert capture.sections[0] == "GPU Speed Of Light Throughput"
    assert {"Warp State Statistics", "Launch Statistics", "Memory Workload Analysis Chart"} <= set(capture.sections)
    assert la.metrics["gpu__time_duration.sum"] == 1230000.0 and la.precision["gpu__time_duration.sum"] == 5000.0
    assert la.metrics["dram__bytes.sum.per_second"] == pytest.approx(1.05e12)  # MWA "Memory Throughput" Tbyte/s
    assert la.metrics["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] == 95.10  # SOL one, %
    assert len(la.rules) == 9
    assert la.rules[0] == Rule("SpeedOfLight", "SOLBottleneck", "INF", la.rules[0].description, "", "")
    assert la.rules[0].description.startswith("This workload")
    l2 = next(r for r in la.rules if r.rule == "MemoryL2Compression")
    assert (l2.section, l2.type, l2.speedup_type, l2.speedup) == (
        "MemoryWorkloadAnalysis_Chart", "OPT", "global", "17.3")


@pytest.mark.parametrize("name", ["gemm_full-sol.csv", "attn_basic-sol.csv"])
def test_sol_only_export_set_unclear(name: str) -> None:
    capture = read(name)
    assert capture.sections == ["GPU Speed Of Light Throughput"] and capture.section_set is None


def test_attn_details_set_basic() -> None:
    assert read("attn_basic-details.csv").section_set == "basic"


# ---------------------------------------------------------------------------------------------------------
# Public exports (other GPUs and ncu versions)


def test_public_romnn_old_raw_page() -> None:
    capture = read_csv_export(PUBLIC / "public_romnn-microgpusim_raw-page_wide_units-row.csv")
    assert len(capture.launches) == 2 and capture.source_format == "csv-raw"
    la = capture.launches[0]
    assert capture.gpu == "NVIDIA GeForce GTX 1080" and la.text["Kernel Time"] == "2023-Oct-01 02:39:05"
    assert la.function == "vecAdd" and la.cc == "" and la.block_size == ""
    assert la.metrics["gpu__time_duration"] == 2720.0 and la.units["gpu__time_duration"] == "ns"  # nsecond
    assert la.metrics["dram__bytes_per_sec"] == pytest.approx(2917647058.82)
    assert la.units["dram__bytes_per_sec"] == "byte/s"  # byte/second
    assert la.text["inst_executed"].startswith("32.00; 32.00")  # instanced list kept as text
    assert "inst_executed" not in la.metrics
    assert any("per-instance value lists" in w for w in capture.warnings)


def test_public_cyanguwa_ncu2020_metrics_long() -> None:
    capture = read_csv_export(PUBLIC / "public_cyanguwa-DeepLearningProfiling_details-page_long_ncu2020.csv")
    assert capture.source_format == "csv-details" and len(capture.launches) == 6
    assert capture.sections == ["Command line profiler metrics"] and capture.section_set is None
    la = capture.launches[3]
    assert la.launch_id == 3 and la.function == "SwapDimension1And2InTensor3UsingTiles"
    assert la.metrics == {"dram__bytes.sum": 113641568.0} and la.units["dram__bytes.sum"] == "byte"
    assert capture.launches[0].function == "EigenMetaKernel"


def test_public_superbench_sm100_log() -> None:
    capture = read_csv_export(PUBLIC / "public_microsoft-superbenchmark_details-page_long_sm100_ncu2025.log")
    la = only(capture)
    assert la.cc == "10.0" and la.function.startswith("cutlass3x_sm100_tensorop")
    assert la.metrics["gpu__time_duration.sum"] == 406240.0
    assert la.metrics["dram__cycles_elapsed.avg.per_second"] == pytest.approx(3995313115.40)
    assert la.metrics["launch__shared_mem_config_size"] == 233472 and len(la.rules) == 8
    assert not any(k.startswith("details::") for k in la.metrics)
    assert capture.section_set == "basic"  # only basic-set sections are in this log


# ---------------------------------------------------------------------------------------------------------
# Framing: CSV inside an ncu log, NVTX columns, line endings


def test_csv_inside_profiling_log(tmp_path: Path) -> None:
    header, units, row = lines_of("gemm_full-raw.csv")
    text = "\n".join([
        "==PROF== Connected to process 659 (/usr/bin/python3.12)", "step 1 loss=0.5",
        '==PROF== Profiling "nvjet_sm90": 0%....50%....100% - 38 passes', "==WARNING== something odd",
        header, units, "application output between rows", row, "==PROF== Disconnected from process 659", "",
    ])
    capture = read_csv_export(write(tmp_path, text, "log.txt"))
    assert only(capture).metrics == only(read("gemm_full-raw.csv")).metrics
    assert any("skipped 2 line(s)" in w for w in capture.warnings)


def test_nvtx_columns_and_crlf(tmp_path: Path) -> None:
    rows = list(csv.reader(lines_of("attn_basic-raw.csv")))
    nvtx = ["thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
            "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"]
    cells = ['1297  "<default domain>:attn:none:none:none:none:none:none" ', ""]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    for row, extra in zip(rows, [nvtx, ["", ""], cells], strict=True):
        writer.writerow(row[:4] + extra + row[4:])
    la = only(read_csv_export(write(tmp_path, out.getvalue())))
    assert la.nvtx == '1297  "<default domain>:attn:none:none:none:none:none:none"'
    assert la.metrics == only(read("attn_basic-raw.csv")).metrics


def test_resaved_minimal_quoting(tmp_path: Path) -> None:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_MINIMAL).writerows(csv.reader(lines_of("attn_basic-raw.csv")))
    assert out.getvalue().startswith("ID,Process ID,")
    assert only(read_csv_export(write(tmp_path, out.getvalue()))).metrics == only(read("attn_basic-raw.csv")).metrics


def test_no_units_row_warns_and_keeps_values(tmp_path: Path) -> None:
    header, _, row = lines_of("attn_basic-raw.csv")
    capture = read_csv_export(write(tmp_path, f"{header}\n{row}\n"))
    la = only(capture)
    assert la.metrics["gpu__time_duration.sum"] == 162.752  # printed in us; no unit to scale by
    assert la.units == {} and any("no units row" in w for w in capture.warnings)


def test_unknown_unit_warns_once(tmp_path: Path) -> None:
    text = (",".join(f'"{c}"' for c in [*FIXED, "a__x.sum", "b__y.sum"]) + "\n"
            + ",".join(['""'] * len(FIXED) + ['"furlong"', '"furlong"']) + "\n"
            + ",".join(['"0"', '"1"', '"p"', '"h"', '"k"', '"1"', '"7"', '"(1, 1, 1)"', '"(1, 1, 1)"', '"0"',
                        '"9.0"', '"1.5"', '"2"']) + "\n")
    capture = read_csv_export(write(tmp_path, text))
    la = only(capture)
    assert la.metrics == {"a__x.sum": 1.5, "b__y.sum": 2.0} and la.units["a__x.sum"] == "furlong"
    assert sum("furlong" in w for w in capture.warnings) == 1


def test_function_name_from_demangled(tmp_path: Path) -> None:
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, " \
           "std::array<char *, 3>>(int, T2, T3)"
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow([*FIXED, "gpu__time_duration.sum"])
    writer.writerow([""] * len(FIXED) + ["us"])
    writer.writerow(["5", "1", "p", "h", name, "1", "7", "(128, 1, 1)", "(4096, 1, 1)", "0", "9.0", "732.20"])
    la = only(read_csv_export(write(tmp_path, out.getvalue())))
    assert (la.launch_id, la.name, la.function) == (5, name, "vectorized_elementwise_kernel")
    assert la.metrics["gpu__time_duration.sum"] == 732200.0 and la.precision["gpu__time_duration.sum"] == 5.0


def test_gzipped_csv_reads(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv.gz"
    path.write_bytes(gzip.compress((H200 / "attn_basic-raw.csv").read_bytes()))
    assert only(read_csv_export(path)).metrics["gpu__time_duration.sum"] == 162752.0


# ---------------------------------------------------------------------------------------------------------
# Fuzzing


UNITS = [("ms", Decimal(10) ** 6, "ns"), ("us", Decimal(1000), "ns"), ("ns", Decimal(1), "ns"),
         ("Gbyte", Decimal(10) ** 9, "byte"), ("Kbyte/block", Decimal(1000), "byte/block"),
         ("Tbyte/s", Decimal(10) ** 12, "byte/s"), ("Ghz", Decimal(10) ** 9, "hz"),
         ("sector/ns", Decimal(10) ** 9, "sector/s"), ("%", Decimal(1), "%"), ("", Decimal(1), ""),
         ("inst/cycle", Decimal(1), "inst/cycle"), ("%/Kbyte", Decimal(1000), "%/byte"),
         ("cycle/nsecond", Decimal(10) ** 9, "hz"), ("Mbyte", Decimal(10) ** 6, "byte"),
         ("byte/second", Decimal(1), "byte/s")]

value_text = st.one_of(
    st.sampled_from(["", "n/a", "nan", "no data"]),
    st.builds(
        lambda neg, whole, frac, sep: ("-" if neg else "") + (f"{whole:,}" if sep else str(whole))
        + (f".{frac}" if frac else ""),
        st.booleans(), st.integers(0, 10**12), st.one_of(st.just(""), st.from_regex(r"[0-9]{1,6}", fullmatch=True)),
        st.booleans(),
    ),
)


@st.composite
def wide_csv(draw: st.DrawFn) -> tuple[str, list[str], list[tuple[str, Decimal, str]], list[list[str]]]:
    names = draw(st.lists(st.from_regex(r"[a-z]{1,6}__[a-z_]{1,10}\.(sum|avg|max)", fullmatch=True),
                          min_size=1, max_size=8, unique=True))
    units = [draw(st.sampled_from(UNITS)) for _ in names]
    rows = draw(st.lists(st.lists(value_text, min_size=len(names), max_size=len(names)), min_size=1, max_size=4))
    framed = draw(st.booleans())
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(FIXED + names)
    writer.writerow([""] * len(FIXED) + [u for u, _, _ in units])
    for i, row in enumerate(rows):
        writer.writerow([str(i), "1", "p", "h", f"void ns::k{i}<int>(float*)", "1", "7", "(1, 1, 1)", "(1, 1, 1)",
                         "0", "9.0", *row])
    text = out.getvalue()
    if framed:
        text = "==PROF== Connected to process 1\napp says hi\n" + text + "==PROF== Disconnected\n"
    return text, names, units, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wide_csv())
def test_fuzz_wide_roundtrip(tmp_path: Path, case: tuple) -> None:
    text, names, units, rows = case
    capture = read_csv_export(write(tmp_path, text))
    assert len(capture.launches) == len(rows)
    for i, (launch, row) in enumerate(zip(capture.launches, rows, strict=True)):
        assert launch.launch_id == i and launch.function == f"k{i}"
        for name, (_, factor, base), cell in zip(names, units, row, strict=True):
            if cell in ("", "n/a", "nan", "no data"):
                assert name not in launch.metrics
                continue
            expected = Decimal(cell.replace(",", "")) * factor
            places = len(cell.split(".")[1]) if "." in cell else 0
            assert launch.metrics[name] == pytest.approx(float(expected), rel=1e-12, abs=1e-300), (name, cell)
            assert launch.units[name] == base
            assert launch.precision[name] == pytest.approx(float(Decimal("0.5") * Decimal(10) ** -places * factor))


def _only_input_error(path: Path) -> None:
    try:
        capture = read_csv_export(path)
    except InputError as exc:
        assert str(exc.message)
    else:
        assert isinstance(capture, Capture) and capture.launches


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(
    st.binary(max_size=3000), st.text(max_size=3000).map(str.encode),
    st.text(alphabet='"ID,\n\r;x0.- 1Kernel Name', max_size=400).map(lambda t: ('"ID",' + t).encode()),
))
def test_fuzz_arbitrary_bytes_raise_only_input_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.csv"
    path.write_bytes(data)
    _only_input_error(path)


_SMALL = {name: (H200 / name).read_bytes() for name in ("attn_basic-raw.csv", "attn_basic-details.csv")}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(_SMALL)), st.data())
def test_fuzz_damaged_real_files_raise_only_input_error(tmp_path: Path, name: str, data: st.DataObject) -> None:
    blob = bytearray(_SMALL[name])
    cut = data.draw(st.integers(0, len(blob)))
    blob = blob[:cut]
    for _ in range(data.draw(st.integers(0, 3))):
        if blob:
            pos = data.draw(st.integers(0, len(blob) - 1))
            blob[pos] = data.draw(st.sampled_from(list(b'",\n\r;x0.-\x00\xff ')))
    path = tmp_path / name
    path.write_bytes(bytes(blob))
    _only_input_error(path)


@pytest.mark.parametrize(("demangled", "expected"), [
    # ncu's CSV pages print the anonymous namespace as `unnamed>` (the `at::native::<` before it dropped): its '>'
    # must not close the kernel's template arguments (h200_many/many_full-raw.csv, row 1, shortened)
    ("void unnamed>::distribution_elementwise_grid_stride_kernel<float, 4, void unnamed>::"
     "distribution_nullary_kernel<float, float4>(long, T3)>(long, T4)", "distribution_elementwise_grid_stride_kernel"),
    ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4>(long, T4)",
     "distribution_elementwise_grid_stride_kernel"),
    ("void (anonymous namespace)::softmax_warp_forward<float, 4>(float *)", "softmax_warp_forward"),
    ("void (anonymous namespace)::unnamed_kernel(float *)", "unnamed_kernel"),
])
def test_function_name_with_the_anonymous_namespace(demangled: str, expected: str) -> None:
    from perfreport.kernels.names import function_name

    assert function_name(demangled) == expected
