"""import_nsys / import_torch_trace / import_samples on real files: values, merge, schema, and every refusal."""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest
from conftest import run_cli

from perfreport.timeshare import import_nsys, import_samples, import_torch_trace
from perfreport.timeshare.store import load_schema

DATA = Path(__file__).parent / "data"
NSYS = DATA / "nsys"
THOR = NSYS / "vernier_thor_nsys2025.3.2_cuda_gpu_kern_sum.csv"
DOTLLM = NSYS / "dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv"
CUDALM = NSYS / "cudalm_nsys2022.4_gridxyz_gpukernsum.csv"
SQLITE = NSYS / "h200_workload_as_nsys_export.sqlite"
TRACE = DATA / "torch" / "workload_torch_trace.json.gz"
SAMPLES_CSV = DATA / "samples" / "zymtrace_like_gpu_kernels.csv"
SAMPLES_JSON = DATA / "samples" / "zymtrace_like_gpu_kernels.json"
NVJET_256 = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"


def _cell_file(campaign: Path, kind: str = "kernel_times") -> dict:
    data = json.loads((campaign / "cells" / "c1" / f"{kind}.json").read_text())
    jsonschema.validate(data, load_schema(kind))
    return data


def _by_function(rows: list[dict]) -> dict[str, dict]:
    return {r["function"]: r for r in rows}


# --- nsys CSV --------------------------------------------------------------------------------------------


def test_cli_import_nsys_thor_csv_with_preamble(campaign: Path) -> None:
    out = run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(THOR), ok=True).output
    assert "saxpyKernel" in out and "100.00" in out and "kernel_times.json" in out
    data = _cell_file(campaign)
    assert (data["campaign"], data["cell_id"], data["schema_version"]) == ("t-campaign", "c1", 1)
    (src,) = data["sources"]
    assert src["format"] == "nsys-csv" and src["report"] == "cuda_gpu_kern_sum" and src["tool_version"] == "2025.3.2"
    assert src["id"] == THOR.name and src["kernels"] == 1 and len(src["sha256"]) == 64
    (k,) = data["kernels"]
    assert k["name"] == "vernier::bench::demo::<unnamed>::saxpyKernel(float, const float *, float *, unsigned long)"
    assert k["function"] == "saxpyKernel"
    assert (k["instances"], k["total_ns"], k["min_ns"], k["max_ns"]) == (61, 178481856, 2852032, 3774688)
    assert k["avg_ns"] == 2925932.1 and k["share_pct"] == 100.0  # nsys printed Avg (ns) 2925932.1


def test_windows_line_endings_and_bom_read_the_same(campaign: Path, tmp_path: Path) -> None:
    crlf = _write(tmp_path, THOR.name, b"\xef\xbb\xbf" + THOR.read_bytes().replace(b"\n", b"\r\n"))
    (k,) = import_nsys(campaign, "c1", crlf).kernels
    assert (k["function"], k["instances"], k["total_ns"]) == ("saxpyKernel", 61, 178481856)


def test_dotllm_shares_and_averages_reproduce_nsys_columns(campaign: Path) -> None:
    result = import_nsys(campaign, "c1", DOTLLM)
    assert result.sources[0]["tool_version"] is None and result.sources[0]["report"] == "cuda_gpu_kern_sum"
    rows = {k["name"]: k for k in result.kernels}
    assert len(rows) == 13
    assert sum(k["share_pct"] for k in rows.values()) == pytest.approx(100.0, abs=1e-3)
    for rec in csv.DictReader(DOTLLM.open()):
        k = rows[rec["Name"]]
        assert round(k["share_pct"], 1) == float(rec["Time (%)"])
        assert k["avg_ns"] == float(rec["Avg (ns)"])
        assert k["total_ns"] == int(rec["Total Time (ns)"]) and k["instances"] == int(rec["Instances"])
    top = result.kernels[0]
    assert top["name"] == "flash_attention_prefill_f16" and top["share_pct"] == pytest.approx(87.1535, abs=1e-4)


def test_pre_2022_gpukernsum_header_reads_the_same_kernel_numbers(campaign: Path, tmp_path: Path) -> None:
    """The real dotLLM rows under the older header (Time(%), Average, Minimum, Maximum; no Med/StdDev)."""
    rows = list(csv.reader(DOTLLM.open()))[1:]
    old = tmp_path / "old_gpukernsum.csv"
    lines = ["Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,Name"]
    lines += [",".join([r[0], r[1], r[2], r[3], r[5], r[6], r[8]]) for r in rows]
    old.write_text("\n".join(lines) + "\n")
    result = import_nsys(campaign, "c1", old)
    assert result.sources[0]["report"] == "gpukernsum"
    k = _by_function(result.kernels)["dequant_q4_k_f16"]
    assert (k["instances"], k["total_ns"], k["min_ns"], k["max_ns"]) == (193, 38453787, 21183, 3318182)


def test_cudalm_gridxyz_rows_merged_per_kernel(campaign: Path) -> None:
    result = import_nsys(campaign, "c1", CUDALM)
    assert result.sources[0]["report"] == "gpukernsum" and len(result.kernels) == 7
    k = _by_function(result.kernels)["int4gemv_rowtile4_bf16_kernel"]
    assert k["instances"] == 13248 + 13248 + 4968 + 9936 + 4968 + 3312 == 49680
    assert k["total_ns"] == 128916208 + 98159574 + 67047787 + 46250049 + 31058176 + 17359410 == 388791204
    assert (k["min_ns"], k["max_ns"]) == (3904, 24352)
    assert k["share_pct"] == pytest.approx(44.8402, abs=1e-4)
    assert any("6 rows" in w and "merged per name" in w for w in result.warnings)
    assert _by_function(result.kernels)["qwen35_rmsnorm_zc_kernel"]["instances"] == 13524


# --- nsys SQLite and torch trace (the same real H200 kernels) ---------------------------------------------


def test_cli_import_torch_trace_real_values(campaign: Path) -> None:
    out = run_cli("import_torch_trace", "--campaign", str(campaign), "--cell-id", "c1", str(TRACE), ok=True).output
    assert NVJET_256 in out and "12.237" in out and "42 gpu_memset" in out
    data = _cell_file(campaign)
    (src,) = data["sources"]
    assert src["format"] == "torch-trace" and src["kernels"] == 9 and src["report"] == "chrome-trace:kernel"
    rows = data["kernels"]
    assert sum(k["share_pct"] for k in rows) == pytest.approx(100.0, abs=1e-3)
    assert sum(k["total_ns"] for k in rows) == 34601143
    assert sum(k["instances"] for k in rows) == 89
    nvjet = rows[0]
    assert nvjet["name"] == NVJET_256
    assert (nvjet["instances"], nvjet["total_ns"], nvjet["min_ns"], nvjet["max_ns"]) == (16, 12236807, 340800, 1190177)
    assert nvjet["share_pct"] == pytest.approx(35.3653, abs=1e-4)
    by_fn = {k["name"]: k for k in rows}
    assert (by_fn[SDPA]["instances"], by_fn[SDPA]["total_ns"]) == (8, 1267809)
    elementwise = [k for k in rows if k["function"] == "vectorized_elementwise_kernel"]
    assert [k["instances"] for k in elementwise] == [8, 16, 4]  # silu, add, weight scaling
    # recorded without shapes: one row per kernel name, the launching op unknown (no op, shapes, useful_flops)
    assert len({k["name"] for k in rows}) == len(rows)
    assert not any({"op", "shapes", "useful_flops"} & set(k) for k in rows)


SHAPES = DATA / "torch" / "shapes"  # the example decoder layer traced with record_shapes=True (README there)


def test_a_trace_with_shapes_splits_a_kernel_name_by_its_launching_op_and_shapes(campaign: Path) -> None:
    import_torch_trace(campaign, "c1", SHAPES / "prefill_shapes_torch_trace.json.gz")
    rows = _cell_file(campaign)["kernels"]
    assert len(rows) == 9 and all(k["op"] and k["shapes"] for k in rows)
    assert sum(k["share_pct"] for k in rows) == pytest.approx(100.0, abs=1e-3)
    # one persistent GEMM kernel, two ops: the o-proj (K 4096) and w2 (K 14336), each with its own time and FLOPs
    nvjet = [(k["op"], k["shapes"], k["instances"], k["total_ns"], k["min_ns"], k["max_ns"], k["useful_flops"],
              k["share_pct"]) for k in rows if k["name"] == NVJET_256]
    assert nvjet == [
        ("aten::mm", "[8192, 14336] x [14336, 4096]", 5, 5947964, 1185177, 1196376, [2 * 8192 * 14336 * 4096], 21.3114),
        ("aten::mm", "[8192, 4096] x [4096, 4096]", 5, 1689686, 337022, 339870, [2 * 8192 * 4096 * 4096], 6.0541)]
    # launches of one op and shapes stay one row (w1 and w3; the two residual adds), scalars left out of the shapes
    by_op = {(k["function"], k["op"]): k for k in rows}
    w13 = by_op[("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "aten::mm")]
    assert (w13["shapes"], w13["instances"], w13["useful_flops"]) == (
        "[8192, 4096] x [4096, 14336]", 10, [2 * 8192 * 4096 * 14336])
    add = by_op[("vectorized_elementwise_kernel", "aten::add")]
    assert (add["shapes"], add["instances"], "useful_flops" in add) == ("[8192, 4096] x [8192, 4096]", 10, False)
    sdpa = by_op[(SDPA, "aten::_cudnn_attention_forward")]
    assert sdpa["shapes"] == "[8, 32, 1024, 128] x [8, 32, 1024, 128] x [8, 32, 1024, 128]"
    assert sdpa["useful_flops"] == [4 * 8 * 32 * (1024 * 1025 / 2) * 128]  # causal: the pairs under the diagonal


def test_a_split_k_reduce_kernel_names_its_op_but_not_its_flops(campaign: Path) -> None:
    import_torch_trace(campaign, "c1", SHAPES / "decode_shapes_torch_trace.json.gz")
    rows = _cell_file(campaign)["kernels"]
    reduce = [(k["op"], k["shapes"], k["instances"], k["total_ns"], k.get("useful_flops")) for k in rows
              if k["function"] == "splitKreduce_kernel"]
    # the o-proj's and w2's reduce: the op's FLOPs went to its first kernel, the split-K GEMM, not to these
    assert reduce == [("aten::mm", "[16, 4096] x [4096, 4096]", 5, 9376, None),
                      ("aten::mm", "[16, 14336] x [14336, 4096]", 5, 8607, None)]
    qkv_w13 = [(k["shapes"], k["instances"], k["useful_flops"]) for k in rows
               if k["function"] == "nvjet_sm90_tst_128x16_64x11_4x1_v_bz_NNT"]
    assert qkv_w13 == [("[16, 4096] x [4096, 14336]", 10, [2 * 16 * 4096 * 14336]),
                       ("[16, 4096] x [4096, 12288]", 5, [2 * 16 * 4096 * 12288])]


def test_plain_json_trace_equals_gzip(campaign: Path, tmp_path: Path) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    a = import_torch_trace(campaign, "c1", TRACE).kernels
    b = import_torch_trace(campaign, "c1", plain).kernels
    strip = [{k: v for k, v in r.items() if k != "source"} for r in a]
    assert strip == [{k: v for k, v in r.items() if k != "source"} for r in b]


def test_sqlite_export_gives_the_torch_numbers(campaign: Path) -> None:
    sq = import_nsys(campaign, "c1", SQLITE)
    assert sq.sources[0]["format"] == "nsys-sqlite" and sq.sources[0]["report"] == "CUPTI_ACTIVITY_KIND_KERNEL"
    tt = import_torch_trace(campaign, "c1", TRACE)
    keys = ("name", "function", "instances", "total_ns", "avg_ns", "min_ns", "max_ns", "share_pct")
    assert [[k[x] for x in keys] for k in sq.kernels] == [[k[x] for x in keys] for k in tt.kernels]
    data = _cell_file(campaign)  # both sources kept side by side
    assert [s["id"] for s in data["sources"]] == sorted([SQLITE.name, TRACE.name])
    assert len(data["kernels"]) == 18


def test_reimport_replaces_only_that_source_and_is_deterministic(campaign: Path) -> None:
    import_torch_trace(campaign, "c1", TRACE)
    import_nsys(campaign, "c1", DOTLLM)
    path = campaign / "cells" / "c1" / "kernel_times.json"
    first = path.read_bytes()
    import_torch_trace(campaign, "c1", TRACE)
    assert path.read_bytes() == first
    data = _cell_file(campaign)
    assert [s["id"] for s in data["sources"]] == [DOTLLM.name, TRACE.name]
    assert [k["source"] for k in data["kernels"]] == [DOTLLM.name] * 13 + [TRACE.name] * 9
    assert data["kernels"][0]["name"] == "flash_attention_prefill_f16"


# --- samples --------------------------------------------------------------------------------------------


def test_cli_import_samples_csv_computes_shares(campaign: Path) -> None:
    out = run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(SAMPLES_CSV), ok=True).output
    assert "612" in out and "36.08" in out and "kernel_samples.json" in out
    data = _cell_file(campaign, "kernel_samples")
    (src,) = data["sources"]
    assert src["format"] == "samples-csv" and src["kernels"] == 7 and src["report"] is None
    rows = data["kernels"]
    assert sum(k["samples"] for k in rows) == 1696
    assert sum(k["share_pct"] for k in rows) == pytest.approx(100.0, abs=1e-3)
    assert rows[0]["function"] == NVJET_256 and rows[0]["share_pct"] == pytest.approx(100 * 612 / 1696, abs=1e-4)
    silu = next(k for k in rows if "silu_kernel" in k["name"])
    assert silu["function"] == "vectorized_elementwise_kernel" and silu["samples"] == 48


def test_import_samples_json_keeps_profiler_shares(campaign: Path) -> None:
    result = import_samples(campaign, "c1", SAMPLES_JSON)
    assert result.kind == "kernel_samples" and result.sources[0]["report"] == "zymtrace (hand-written example)"
    assert [k["share_pct"] for k in result.kernels] == [30.6, 24.3, 20.95, 3.15, 2.4, 1.8, 1.6]
    import_samples(campaign, "c1", SAMPLES_CSV)
    data = _cell_file(campaign, "kernel_samples")
    assert len(data["sources"]) == 2 and len(data["kernels"]) == 14


# --- refusals: one clear message, exit code 2, no traceback, nothing written --------------------------------


def _refused(campaign: Path, verb: str, path: Path, *needles: str) -> str:
    code, out = run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1", str(path))
    assert code == 2, out
    assert out.startswith("Error: ") and out.count("Error") == 1 and "Traceback" not in out
    for needle in needles:
        assert needle in out, (needle, out)
    assert not (campaign / "cells").exists(), "nothing may be written on error"
    return out


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(content.encode() if isinstance(content, str) else content)
    return p


@pytest.mark.parametrize("verb", ["import_nsys", "import_torch_trace", "import_samples"])
def test_empty_file_refused(campaign: Path, tmp_path: Path, verb: str) -> None:
    _refused(campaign, verb, _write(tmp_path, "empty.csv", ""), "the file is empty")


def test_missing_file_refused(campaign: Path, tmp_path: Path) -> None:
    _refused(campaign, "import_nsys", tmp_path / "nope.csv", "no such file")


def test_nsys_mem_time_summary_is_not_a_kernel_summary(campaign: Path) -> None:
    out = _refused(campaign, "import_nsys", NSYS / "vernier_thor_nsys2025.3.2_cuda_gpu_mem_time_sum.csv",
                   ":2: not an nsys kernel summary", "'Total Time (ns)'", "'Instances'", "'Name'",
                   "memory-operation", "cuda_gpu_kern_sum")
    assert "Operation" in out


def test_nsys_export_without_kernels_is_refused_with_the_trace_hint(campaign: Path) -> None:
    _refused(campaign, "import_nsys", NSYS / "vernier_thor_nsys2025.3.2_no_kernels.csv",
             ":2: nsys found no CUDA kernels", "--trace=cuda")


def test_nsys_api_summary_and_column_format(campaign: Path, tmp_path: Path) -> None:
    api = "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n" \
          "61.2,12045511,512,23526.4,22101.0,18004,102331,4120.7,cudaLaunchKernel\n"
    _refused(campaign, "import_nsys", _write(tmp_path, "api.csv", api), "API-call summary")
    column = (" Time (%)  Total Time (ns)  Instances    Avg (ns)      Med (ns)  Name\n"
              " --------  ---------------  ---------  ------------  ----------  ----\n"
              "    100.0      178,481,856         61  2,925,932.1  2,890,848.0  saxpyKernel\n")
    _refused(campaign, "import_nsys", _write(tmp_path, "col.txt", column), "column (text) format", "--format csv")


def test_nsys_header_without_rows_bad_number_and_torch_json(campaign: Path, tmp_path: Path) -> None:
    header = THOR.read_text().splitlines()[1]
    _refused(campaign, "import_nsys", _write(tmp_path, "h.csv", header + "\n"), "no rows under it", "--trace=cuda")
    row = '100.0,abc,61,1.0,1.0,1,2,0.0,"k"'
    _refused(campaign, "import_nsys", _write(tmp_path, "n.csv", header + "\n" + row + "\n"),
             "n.csv:2: column 'Total Time (ns)': expected a number, got 'abc'")
    _refused(campaign, "import_nsys", TRACE, "binary data")
    _refused(campaign, "import_nsys", _write(tmp_path, "t.json", '{"traceEvents": []}'), "import_torch_trace")
    _refused(campaign, "import_nsys", _write(tmp_path, "r.nsys-rep", b"\x00rep"), "nsys export --type sqlite")


def test_sqlite_without_kernel_table(campaign: Path, tmp_path: Path) -> None:
    p = tmp_path / "nokernels.sqlite"
    con = sqlite3.connect(p)
    con.executescript("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
                      "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, nameId INTEGER);")
    con.close()
    _refused(campaign, "import_nsys", p, "no CUPTI_ACTIVITY_KIND_KERNEL table", "no CUDA trace", "--trace=cuda")
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, demangledName INTEGER)")
    con.commit()
    con.close()
    _refused(campaign, "import_nsys", p, "has no kernel execution rows")


def test_torch_trace_without_kernels_or_valid_json_is_refused(campaign: Path, tmp_path: Path) -> None:
    _refused(campaign, "import_torch_trace", _write(tmp_path, "x.json", '{"foo": 1}'),
             "not a Chrome trace")
    events = json.loads(gzip.decompress(TRACE.read_bytes()))
    events["traceEvents"] = [e for e in events["traceEvents"] if e.get("cat") != "kernel"]
    _refused(campaign, "import_torch_trace", _write(tmp_path, "cpu.json", json.dumps(events)),
             "no GPU kernel events", "cpu_op x355", "ProfilerActivity.CUDA")
    cut = gzip.decompress(TRACE.read_bytes())[:5000]
    _refused(campaign, "import_torch_trace", _write(tmp_path, "cut.json", cut), "not valid JSON")
    _refused(campaign, "import_torch_trace", _write(tmp_path, "bad.json.gz", b"\x1f\x8bnot gzip"),
             "cannot be decompressed")


@pytest.mark.parametrize(("content", "needles"), [
    ("kernel,samples\nk1,-3\n", [":2: samples: expected an integer >= 0, got -3"]),
    ("kernel,samples\nk1,2.5\n", [":2: samples: expected an integer >= 0, got '2.5'"]),
    ("kernel,count\nk1,3\n", [":1: missing column(s) samples", "kernel,samples[,share_pct]"]),
    ("kernel,samples,share\nk1,3,0.5\n", ["'share' column is ambiguous", "share_pct"]),
    ("kernel,samples,share_pct\nk1,3,50\nk2,3,\n", ["share_pct is given for 1 of 2 kernels"]),
    ("kernel,samples,share_pct\nk1,3,80\nk2,3,40\n", ["add up to 120.00%"]),
    ("kernel,samples,share_pct\nk1,3,150\n", [":2: share_pct: expected a percent in [0, 100]"]),
    ("kernel,samples\nk1,0\n", ["every kernel has 0 samples"]),
    ('{"kernels": [{"kernel": "k1", "samples": -1}]}', ["kernels[0]: samples: expected an integer >= 0, got -1"]),
    ('{"kernels": [{"kernel": "k1"}]}', ["kernels[0]: missing 'samples'"]),
    ('{"rows": []}', ["JSON without a 'kernels' list"]),
])
def test_malformed_samples_are_refused_with_the_reason(campaign: Path, tmp_path: Path, content: str,
                                                       needles: list[str]) -> None:
    _refused(campaign, "import_samples", _write(tmp_path, "s.csv", content), *needles)


def test_unknown_cell_and_bad_id_refused(campaign: Path) -> None:
    code, out = run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c9", str(THOR))
    assert code == 2 and "no cell with id 'c9'" in out and "c1" in out and "Traceback" not in out
    code, out = run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "../x", str(THOR))
    assert code == 2 and "not allowed" in out
    assert not (campaign / "cells").exists()


def test_damaged_existing_file_is_not_overwritten(campaign: Path) -> None:
    path = campaign / "cells" / "c1" / "kernel_times.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    code, out = run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(THOR))
    assert code == 2 and "not valid JSON" in out and "delete it" in out
    assert path.read_text() == "{not json"
