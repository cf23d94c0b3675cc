"""import_samples on pprof profiles and folded stacks: kernel-frame attribution, sample types, the join, refusals.

The pprof fixtures were written by real pprof writers (tests/data/samples/README.md): pprof's own (`go tool pprof
-proto`) and Go's runtime/pprof. Their kernel counts are those of zymtrace_like_gpu_kernels.csv.
"""

from __future__ import annotations

import csv
import gzip
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import copy_example, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfreport.errors import PerfReportError
from perfreport.timeshare import import_samples
from perfreport.timeshare.store import load_schema
from perfreport.warehouse.db import open_campaign

SAMPLES = Path(__file__).parent / "data" / "samples"
PPROF = SAMPLES / "parca_like_gpu_kernels.pb.gz"
FOLDED = SAMPLES / "parca_like_gpu_kernels.folded"
GO_CPU = SAMPLES / "go_cpu_no_kernels.pb.gz"
CSV_SAME = SAMPLES / "zymtrace_like_gpu_kernels.csv"  # the same kernel counts as a per-kernel CSV
PREFILL = "prefill-b8-s1024"  # the example campaign's cell whose kernels the fixtures name
NVJET_256 = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
ADD = ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
# gpu_time/nanoseconds of each kernel's stacks in the fixture: samples x 10 us plus (samples x 7919) mod 5000 per stack
GPU_NS = {NVJET_256: 6_126_428, ADD: 360_084}
# pprof's own reader on the fixture: `go tool pprof -top -sample_index=gpu_time` flat% (tests/data/samples/README.md)
GO_PPROF_GPU_TIME_PCT = [36.08, 28.64, 24.69, 3.73, 2.83, 2.12, 1.90]


def _csv_counts() -> dict[str, int]:
    lines = [line for line in CSV_SAME.read_text().splitlines() if not line.startswith("#")]
    return {row["kernel"]: int(row["samples"]) for row in csv.DictReader(lines)}


def _cell_file(camp: Path, cell: str = "c1") -> dict[str, Any]:
    data = json.loads((camp / "cells" / cell / "kernel_samples.json").read_text())
    jsonschema.validate(data, load_schema("kernel_samples"))
    return data


def _refused(camp: Path, path: Path, *needles: str, extra: tuple[str, ...] = ()) -> str:
    code, out = run_cli("import_samples", "--campaign", str(camp), "--cell-id", "c1", *extra, str(path))
    assert code == 2, out
    assert out.startswith("Error: ") and out.count("Error") == 1 and "Traceback" not in out
    for needle in needles:
        assert needle in out, (needle, out)
    assert not (camp / "cells").exists(), "nothing may be written on error"
    return out


@pytest.fixture(scope="module")
def example_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two copies of the example campaign: the pprof fixture imported into one, the same counts as CSV into the
    other, both into the prefill cell."""
    by_pprof = copy_example(tmp_path_factory.mktemp("pprof") / "h200-decoder-layer")
    by_csv = copy_example(tmp_path_factory.mktemp("csv") / "h200-decoder-layer")
    import_samples(by_pprof, PREFILL, PPROF)
    import_samples(by_csv, PREFILL, CSV_SAME)
    return by_pprof, by_csv


# --- pprof -------------------------------------------------------------------------------------------------------


def test_cli_pprof_counts_each_kernel_frame_with_the_default_sample_type(campaign: Path) -> None:
    out = run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(PPROF), ok=True).output
    assert "samples-pprof, sample_type samples/count" in out and "36.08" in out
    assert "235 samples (12.2%) have no CUDA-kernel frame" in out and "'ioctl' (95)" in out
    data = _cell_file(campaign)
    (src,) = data["sources"]
    assert (src["format"], src["report"], src["kernels"]) == ("samples-pprof", "sample_type samples/count", 7)
    rows = {k["name"]: k for k in data["kernels"]}
    assert {name: k["samples"] for name, k in rows.items()} == _csv_counts()  # every stack of a kernel summed
    assert rows[NVJET_256]["share_pct"] == pytest.approx(100 * 612 / 1696, abs=1e-4)
    assert sum(k["share_pct"] for k in rows.values()) == pytest.approx(100.0, abs=1e-3)
    assert rows[ADD]["function"] == "vectorized_elementwise_kernel"
    # a cell without ncu or timeline names: every kernel found as the leaf under a CUDA launch call, and said so
    assert any("1,696 of 1,696 kernel samples went to the leaf frame under a CUDA launch call" in w
               for w in src["warnings"])


def test_sample_type_picks_the_values_and_is_recorded(campaign: Path) -> None:
    result = import_samples(campaign, "c1", PPROF, sample_type="gpu_time")
    (src,) = result.sources
    assert src["report"] == "sample_type gpu_time/nanoseconds"
    assert "its values (nanoseconds) are summed as `samples`" in src["warnings"][0]
    rows = {k["name"]: k for k in result.kernels}
    assert rows[NVJET_256]["samples"] == GPU_NS[NVJET_256] and rows[ADD]["samples"] == GPU_NS[ADD]
    total = sum(k["samples"] for k in rows.values())
    assert rows[NVJET_256]["share_pct"] == pytest.approx(100 * GPU_NS[NVJET_256] / total, abs=1e-4)
    assert rows[NVJET_256]["share_pct"] != pytest.approx(100 * 612 / 1696, abs=1e-3)  # not the count shares
    assert [round(k["share_pct"], 2) for k in result.kernels] == GO_PPROF_GPU_TIME_PCT
    same = import_samples(campaign, "c1", PPROF, sample_type="gpu_time/nanoseconds")
    assert [k["samples"] for k in same.kernels] == [k["samples"] for k in result.kernels]


def test_wrong_sample_type_lists_the_types_present(campaign: Path) -> None:
    _refused(campaign, PPROF, "no sample type 'cpu'", "the profile has samples/count, gpu_time/nanoseconds",
             "(default samples/count)", "--sample-type", extra=("--sample-type", "cpu"))
    _refused(campaign, PPROF, "no sample type 'samples/nanoseconds'", extra=("--sample-type", "samples/nanoseconds"))
    _refused(campaign, CSV_SAME, "--sample-type picks a sample type of a pprof profile",
             extra=("--sample-type", "samples"))


def test_profile_without_default_sample_type_takes_the_last_as_pprof_does(campaign: Path) -> None:
    # Go's CPU profile has samples/count and cpu/nanoseconds and no default_sample_type: pprof shows cpu
    out = _refused(campaign, GO_CPU, "sample type cpu/nanoseconds, of 2: samples/count, cpu/nanoseconds")
    assert "'main.spin'" in out


def test_go_cpu_profile_has_no_kernel_frame(campaign: Path) -> None:
    _refused(campaign, GO_CPU, "no CUDA-kernel frame in any of its", "its leaf frames are 'main.spin'",
             "it has no ncu_kernels.json or kernel_times.json yet", "[GPU Kernel] NAME", "cudaLaunchKernel",
             extra=("--sample-type", "samples"))


def test_corrupt_pprof_is_refused(campaign: Path, tmp_path: Path) -> None:
    data = PPROF.read_bytes()
    cut = tmp_path / "cut.pb.gz"
    cut.write_bytes(data[: len(data) // 2])
    _refused(campaign, cut, "cut.pb.gz': gzip-compressed but cannot be decompressed", "ended before the end",
             "cut short or damaged")
    noise = bytes(random.Random(7).randrange(256) for _ in range(2000))
    for name, content in (("noise.pb", noise), ("noise.pb.gz", gzip.compress(noise, mtime=0))):
        garbage = tmp_path / name
        garbage.write_bytes(content)
        _refused(campaign, garbage, f"{name}': binary data that is not a pprof profile (protobuf:", "damaged")
    inner = gzip.decompress(data)
    short = tmp_path / "short.pb"
    short.write_bytes(inner[: len(inner) - 7])  # plain profile.proto cut inside its last message
    _refused(campaign, short, "short.pb'", "pprof profile")


# --- folded stacks -----------------------------------------------------------------------------------------------


def test_folded_stacks_give_the_counts_of_the_pprof(campaign: Path) -> None:
    result = import_samples(campaign, "c1", FOLDED)
    (src,) = result.sources
    assert (src["format"], src["report"]) == ("samples-folded", None)
    assert {k["name"]: k["samples"] for k in result.kernels} == _csv_counts()
    assert any("235 samples (12.2%) have no CUDA-kernel frame" in w for w in src["warnings"])


def test_plain_profile_and_gzipped_folded_read_the_same(campaign: Path, tmp_path: Path) -> None:
    plain = tmp_path / "profile.pb"  # profile.proto without gzip: recognized as binary data, not by its name
    plain.write_bytes(gzip.decompress(PPROF.read_bytes()))
    folded_gz = tmp_path / "stacks.txt.gz"
    folded_gz.write_bytes(gzip.compress(FOLDED.read_bytes(), mtime=0))
    for path, fmt in ((plain, "samples-pprof"), (folded_gz, "samples-folded")):
        result = import_samples(campaign, "c1", path)
        assert result.sources[0]["format"] == fmt
        assert {k["name"]: k["samples"] for k in result.kernels} == _csv_counts()


def test_folded_kernel_frames_marked_or_known_win_over_the_leaf(campaign: Path, tmp_path: Path) -> None:
    # eBPF+CUPTI flame graphs mark the kernel '[GPU Kernel] NAME'; instruction-level frames may sit below it
    text = ("# CPU stacks extended with the kernel they launched\n"
            "main;launch;cudaLaunchKernel;[GPU Kernel] matmul_kernel;HMMA.16816.F32 30\n"
            "main;launch;cudaLaunchKernel;[GPU Kernel] matmul_kernel 10\n"
            "main;copy;cudaLaunchKernel;copy_kernel 5\n"
            "main;sync;cudaDeviceSynchronize 7\n")
    path = tmp_path / "marked.folded"
    path.write_text(text)
    rows = {k["name"]: k["samples"] for k in import_samples(campaign, "c1", path).kernels}
    assert rows == {"matmul_kernel": 40, "copy_kernel": 5}


def test_known_kernel_names_find_the_frame_not_the_leaf(campaign: Path, tmp_path: Path) -> None:
    times = campaign / "cells" / "c1" / "kernel_times.json"
    times.parent.mkdir(parents=True)
    times.write_text(json.dumps({"schema_version": 1, "campaign": "t-campaign", "cell_id": "c1", "sources": [],
                                 "kernels": [{"name": "void ns::gemm_kernel<float>(float*)",
                                              "function": "gemm_kernel"}]}))
    path = tmp_path / "stall.folded"  # zymtrace-like: the kernel, then its SASS instruction and stall reason
    path.write_text("main;cudaLaunchKernel;void ns::gemm_kernel<float>(float*);LDG.E.128;long_scoreboard 9\n")
    (row,) = import_samples(campaign, "c1", path).kernels
    assert (row["name"], row["function"], row["samples"]) == ("void ns::gemm_kernel<float>(float*)", "gemm_kernel", 9)


@pytest.mark.parametrize(("content", "needles"), [
    ("main;a;b 1.5\n", [":1: expected a folded stack", "got count '1.5'"]),
    ("main;a;b 4\nmain;c -2\n", [":2: expected a folded stack", "got count '-2'"]),
    ("main;a;b 4\nnot a stack\n", [":2: expected a folded stack", "got 'not a stack'"]),
    ("main;compute 12\nmain;idle 3\n", ["no CUDA-kernel frame in any of its 2 stacks", "'compute' (12), 'idle' (3)"]),
])
def test_malformed_folded_stacks_are_refused(campaign: Path, tmp_path: Path, content: str,
                                             needles: list[str]) -> None:
    path = tmp_path / "bad.folded"
    path.write_text(content)
    _refused(campaign, path, "bad.folded", *needles)


# --- the join: a pprof and the CSV of the same counts give the same sample shares ----------------------------------


def test_pprof_joins_like_the_equivalent_csv(example_twice: tuple[Path, Path]) -> None:
    by_pprof, by_csv = example_twice
    sql = ("SELECT kernel, function, matched_sources, samples, sample_share_pct FROM kernel_join "
           "WHERE cell_id = ? AND samples IS NOT NULL ORDER BY kernel, part")
    got = [open_campaign(camp).execute(sql, [PREFILL]).fetchall() for camp in (by_pprof, by_csv)]
    assert len(got[0]) == 8  # 7 kernels; the persistent GEMM ncu split into two launches is two rows
    assert [r[:4] for r in got[0]] == [r[:4] for r in got[1]]
    assert [r[4] for r in got[0]] == pytest.approx([r[4] for r in got[1]], abs=1e-9)
    assert all(r[2] == "ncu,times,samples" for r in got[0])  # every kernel frame met its ncu and trace rows
    src = _cell_file(by_pprof, PREFILL)["sources"][0]
    assert not any("CUDA launch call" in w for w in src["warnings"])  # found by the cell's kernel names (rule 1)


# --- fuzz: damaged profiles and stacks give a clean result or one PerfReportError --------------------------------


@st.composite
def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` after 1-3 byte flips, insertions or cuts."""
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "cut"]))
        byte = bytes([draw(st.integers(0, 255))])
        data = {"flip": data[:i] + byte + data[i + 1:], "insert": data[:i] + byte + data[i:], "cut": data[:i]}[kind]
    return data


def _clean_or_one_error(camp: Path, path: Path) -> None:
    target = camp / "cells" / "c1" / "kernel_samples.json"
    before = target.read_bytes() if target.exists() else None
    try:
        result = import_samples(camp, "c1", path)
    except PerfReportError as exc:
        assert str(exc.message).strip() and "Traceback" not in exc.message
        assert (target.read_bytes() if target.exists() else None) == before
    else:
        assert all(k["name"] and k["function"] and k["samples"] >= 0 for k in result.kernels)


_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(data=st.data(), gzipped=st.booleans())
def test_fuzz_pprof(campaign: Path, data: st.DataObject, gzipped: bool) -> None:
    raw = data.draw(_damaged(gzip.decompress(PPROF.read_bytes())))
    path = campaign.parent / "fuzz.pb.gz"
    path.write_bytes(gzip.compress(raw, mtime=0) if gzipped else raw)
    _clean_or_one_error(campaign, path)


@_FUZZ
@given(data=st.data())
def test_fuzz_folded(campaign: Path, data: st.DataObject) -> None:
    path = campaign.parent / "fuzz.folded"
    path.write_bytes(data.draw(_damaged(FOLDED.read_bytes())))
    _clean_or_one_error(campaign, path)
