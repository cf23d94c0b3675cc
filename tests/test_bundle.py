"""bundle.py: bundle tree, shipped JSON Schema, kernel_internals fill that touches nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from perfreport.bundle.layout import (
    BUNDLE_JSON,
    BUNDLES_SUBDIR,
    bundle_init,
    fill_kernel_internals,
    find_profiles,
    is_bundle,
    load_schema,
    validate_bundle_data,
)
from perfreport.errors import IdError, InputError


def kernel(**overrides: Any) -> dict[str, Any]:
    row = {
        "name": "void gemm_kernel<float, 128>(float const*, float*)",
        "function": "gemm_kernel",
        "launches": 4,
        "achieved_occupancy_pct": 45.2,
        "theoretical_occupancy_pct": 50.0,
        "dram_throughput_pct_peak": 71.5,
        "sm_throughput_pct_peak": 38.0,
        "regs_per_thread": 128,
        "smem_per_block_bytes": 49152,
        "block_limit_factor": "registers",
    }
    row.update(overrides)
    return row


def tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() + ("/" if p.is_dir() else "") for p in path.rglob("*"))


def test_schema_is_valid_draft_2020_12() -> None:
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_init_creates_exactly_the_tree(tmp_path: Path) -> None:
    bundle = bundle_init(tmp_path, "h200-decode-bs16")
    assert bundle == tmp_path / BUNDLES_SUBDIR / "h200-decode-bs16"
    assert tree(tmp_path) == [
        "experiments/",
        "experiments/artifacts/",
        "experiments/artifacts/inference-perf-bench/",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/HANDOFF.md",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/SOURCE.md",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/inference_perfbench_v1.json",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/ncu-profiles/",
        "experiments/artifacts/inference-perf-bench/h200-decode-bs16/summary.md",
    ]
    text = (bundle / BUNDLE_JSON).read_text()
    data = json.loads(text)
    assert list(data.items()) == [
        ("schema_version", 1), ("bundle_id", "h200-decode-bs16"), ("context", {}), ("results", []),
        ("kernel_internals", None),
    ]
    assert text == json.dumps(data, indent=2) + "\n"
    assert validate_bundle_data(data) == []
    for name in ("SOURCE.md", "summary.md", "HANDOFF.md"):
        assert "`h200-decode-bs16`" in (bundle / name).read_text()
    assert is_bundle(bundle)


def test_second_init_errors(tmp_path: Path) -> None:
    bundle = bundle_init(tmp_path, "b1")
    (bundle / "summary.md").write_text("mine\n")
    with pytest.raises(InputError, match="already exists; refusing to overwrite"):
        bundle_init(tmp_path, "b1")
    assert (bundle / "summary.md").read_text() == "mine\n"
    assert [p.name for p in bundle.parent.iterdir()] == ["b1"]  # no staging folder left behind


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b", "", "x y"])
def test_bad_id_errors_and_creates_nothing(tmp_path: Path, bad: str) -> None:
    with pytest.raises(IdError):
        bundle_init(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_init_needs_existing_root(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not an existing folder"):
        bundle_init(tmp_path / "missing", "b1")
    assert not (tmp_path / "missing").exists()


def test_is_bundle(tmp_path: Path) -> None:
    assert not is_bundle(tmp_path)
    assert not is_bundle(tmp_path / "nope")
    (tmp_path / "ncu-profiles").mkdir()
    assert is_bundle(tmp_path)


def test_find_profiles_ordering_and_filter(tmp_path: Path) -> None:
    profiles = tmp_path / "ncu-profiles"
    (profiles / "sub").mkdir(parents=True)
    names = ["k2.csv", "k10.ncu-rep", "a.ncu-rep.gz", "run.log", "notes.txt", "B.CSV", ".hidden.csv",
             "sub/z.csv", "x.ncu-rep.tmp"]
    for name in names:
        (profiles / name).write_text("x")
    found = find_profiles(tmp_path)
    assert [p.relative_to(profiles).as_posix() for p in found] == [
        "B.CSV", "a.ncu-rep.gz", "k10.ncu-rep", "k2.csv", "run.log", "sub/z.csv",
    ]


def test_find_profiles_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no ncu-profiles/ folder"):
        find_profiles(tmp_path)
    (tmp_path / "ncu-profiles").mkdir()
    (tmp_path / "ncu-profiles" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"holds no ncu export.*found notes\.txt"):
        find_profiles(tmp_path)


def test_fill_preserves_unrelated_fields(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    bundle.mkdir()
    original = {
        "zeta_tool_field": {"nested": [1, 2.5, {"deep": None, "b": True}], "a": "x"},
        "schema_version": 1,
        "bundle_id": "b",
        "kernel_internals": None,
        "context": {"model": "llama", "tp": 1, "extra": {"z": 1, "a": 2}},
        "results": [{"metric": "ttft_ms", "value": 12.75, "unit": "ms"}],
        "added_by_other_tool": "keep me",
    }
    (bundle / BUNDLE_JSON).write_text(json.dumps(original, indent=4))
    rows = [kernel(), kernel(name="flash_fwd", function="flash_fwd", achieved_occupancy_pct=None,
                            block_limit_factor=None)]
    path = fill_kernel_internals(bundle, rows, captured_at="2026-12-02T10:00:00Z", method="ncu --set full")
    assert path == bundle / BUNDLE_JSON
    text = path.read_text()
    data = json.loads(text)
    assert list(data) == list(original)  # key order kept, kernel_internals in its old place
    assert {k: v for k, v in data.items() if k != "kernel_internals"} == {
        k: v for k, v in original.items() if k != "kernel_internals"
    }
    assert list(data["context"]["extra"]) == ["z", "a"]  # nested order untouched too
    ki = data["kernel_internals"]
    assert list(ki) == ["captured_at", "method", "per_kernel"]
    assert list(ki["per_kernel"][0]) == sorted(kernel())
    assert ki["per_kernel"] == [kernel(), rows[1]]
    assert ki["per_kernel"][0]["achieved_occupancy_pct"] == pytest.approx(45.2)
    assert text == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    # Filling again with the same input is byte-identical (deterministic).
    fill_kernel_internals(bundle, rows, captured_at="2026-12-02T10:00:00Z", method="ncu --set full")
    assert path.read_text() == text


def test_fill_appends_key_when_absent(tmp_path: Path) -> None:
    (tmp_path / BUNDLE_JSON).write_text(json.dumps({"schema_version": 1, "bundle_id": "b", "x": 1}))
    fill_kernel_internals(tmp_path, [kernel()], captured_at=None, method="ncu")
    data = json.loads((tmp_path / BUNDLE_JSON).read_text())
    assert list(data) == ["schema_version", "bundle_id", "x", "kernel_internals"]
    assert data["kernel_internals"]["captured_at"] is None


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (kernel(achieved_occupancy_pct="45%"),
         'kernel_internals.per_kernel[0].achieved_occupancy_pct: expected number or null, got "45%"'),
        (kernel(launches=2.5), "kernel_internals.per_kernel[0].launches: expected integer, got 2.5"),
        (kernel(regs_per_thread=True),
         "kernel_internals.per_kernel[0].regs_per_thread: expected number or null, got true"),
        (kernel(dram_throughput_pct_peak=float("nan")),
         "kernel_internals.per_kernel[0].dram_throughput_pct_peak: expected a finite number or null, "
         "got nan"),
        ({k: v for k, v in kernel().items() if k != "function"},
         "kernel_internals.per_kernel[0].function: required field is missing"),
        (kernel(occupancy=1.0), "kernel_internals.per_kernel[0].occupancy: unknown field; allowed: name, "),
    ],
)
def test_invalid_per_kernel_refused_and_nothing_written(tmp_path: Path, row: dict[str, Any],
                                                        problem: str) -> None:
    bundle = bundle_init(tmp_path, "b1")
    before = (bundle / BUNDLE_JSON).read_bytes()
    with pytest.raises(InputError) as info:
        fill_kernel_internals(bundle, [row], captured_at=None, method="ncu --set full")
    msg = info.value.format_message()
    assert problem in msg
    assert "left unchanged" in msg
    assert (bundle / BUNDLE_JSON).read_bytes() == before
    assert sorted(p.name for p in bundle.iterdir()) == sorted(
        ["ncu-profiles", BUNDLE_JSON, "SOURCE.md", "summary.md", "HANDOFF.md"]
    )  # no temp file left


def test_fill_reports_every_problem(tmp_path: Path) -> None:
    bundle = bundle_init(tmp_path, "b1")
    rows = [kernel(), kernel(achieved_occupancy_pct="x"), kernel(launches=0, smem_per_block_bytes=-1)]
    with pytest.raises(InputError) as info:
        fill_kernel_internals(bundle, rows, captured_at=5, method="")  # type: ignore[arg-type]
    msg = info.value.format_message()
    assert "5 problem(s)" in msg
    for path in ["kernel_internals.captured_at", "kernel_internals.method",
                 "kernel_internals.per_kernel[1].achieved_occupancy_pct",
                 "kernel_internals.per_kernel[2].launches",
                 "kernel_internals.per_kernel[2].smem_per_block_bytes"]:
        assert f"  - {path}: expected" in msg


def test_fill_refuses_empty_per_kernel(tmp_path: Path) -> None:
    bundle = bundle_init(tmp_path, "b1")
    with pytest.raises(InputError, match=r"kernel_internals.per_kernel: expected at least 1 item"):
        fill_kernel_internals(bundle, [], captured_at=None, method="ncu")


def test_fill_missing_or_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"inference_perfbench_v1.json: not found"):
        fill_kernel_internals(tmp_path, [kernel()], None, "ncu")
    path = tmp_path / BUNDLE_JSON
    for text, pattern in [
        ('{"schema_version": 1,\n  "bundle_id": }', r"invalid JSON at line 2, column 16"),
        ("[1, 2]", r"expected a JSON object at the top level, got list"),
        ('{"a": NaN}', r"NaN is not valid JSON"),
        ('{"a": 1, "a": 2}', r"duplicate key 'a'"),
    ]:
        path.write_text(text)
        with pytest.raises(InputError, match=pattern) as info:
            fill_kernel_internals(tmp_path, [kernel()], None, "ncu")
        assert str(path) in info.value.format_message()
        assert path.read_text() == text


def test_fill_refuses_file_invalid_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / BUNDLE_JSON
    path.write_text(json.dumps({"schema_version": 2, "bundle_id": "b", "results": {}}))
    with pytest.raises(InputError) as info:
        fill_kernel_internals(tmp_path, [kernel()], None, "ncu")
    msg = info.value.format_message()
    assert "  - schema_version: expected 1, got 2" in msg
    assert "  - results: expected array, got an object" in msg
