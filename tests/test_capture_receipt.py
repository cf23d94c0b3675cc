"""capture receipt: schema, validation (jsonschema and the stdlib fallback agree), atomic deterministic writes.

The receipt values below are those of a real attach capture on the H200 (ncu 2025.3.1, driver 580.159.04,
tests/data/h200_shared/attach_twice.log: nvjet GEMM, SIGINT, rc 130).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfreport.bundle.receipt import (
    ANNOTATIONS,
    SUPPORTED_KEYWORDS,
    load_receipt,
    load_schema,
    new_receipt,
    validate_receipt,
    write_receipt,
)
from perfreport.errors import InputError, PerfReportError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "perfreport" / "config" / "schemas" / "capture_receipt.schema.json"
NCU = "/usr/local/cuda/bin/ncu"
CAPTURE_ARGV = [NCU, "--mode", "attach", "--hostname", "127.0.0.1", "--clock-control", "none", "--kernel-name",
                "regex:nvjet", "--launch-count", "1", "--set", "basic", "-o", "/b/ncu-profiles/.a1.tmp/a1"]
KERNEL = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def receipt_kwargs() -> dict[str, Any]:
    """Everything new_receipt takes, as capture run passes it for the recorded attach capture."""
    return dict(
        campaign="h200-decoder-layer", cell_id="decode-b16", mode="attach", ncu_version="2025.3.1.0",
        driver_version="580.159.04", cuda_version="13.0", gpu_name="NVIDIA H200", kernel_patterns=["regex:nvjet"],
        kernel_name_base="function", section_set="basic", metrics=[], launch_skip=0, launch_count=1,
        replay_mode="kernel", target_processes="all", deployment_revision=None,
        started_at="2026-12-02T10:15:03.250Z", ended_at="2026-12-02T10:15:09.004Z", kernels_profiled=1,
        kernel_names=[KERNEL], exit_status=130,
        outputs=[{"path": "ncu-profiles/a1.ncu-rep", "bytes": 191234, "sha256": "0" * 63 + "a"},
                 {"path": "ncu-profiles/a1-raw.csv", "bytes": 48211, "sha256": "b" * 64}],
        diagnosis=[{"code": "ok", "message": "1 kernel profiled"}],
        steps=[{"step": "ncu-version", "argv": [NCU, "--version"], "rc": 0,
                "started_at": "2026-12-02T10:15:03.251Z", "ended_at": "2026-12-02T10:15:03.400Z"},
               {"step": "capture", "argv": list(CAPTURE_ARGV), "rc": 130, "started_at": "2026-12-02T10:15:03.500Z",
                "ended_at": "2026-12-02T10:15:08.100Z"},
               {"step": "export-raw", "argv": [NCU, "--import", "a1.ncu-rep", "--csv", "--page", "raw"], "rc": 1,
                "started_at": "2026-12-02T10:15:08.200Z", "ended_at": "2026-12-02T10:15:08.900Z",
                "error": "==ERROR== Failed to open a1.ncu-rep"}],
        cleanup=[{"step": "sigint-ncu", "argv": ["kill", "-INT", "4242"], "rc": 0, "ok": True},
                 {"step": "remove-staging", "argv": ["rm", "-r", "/b/ncu-profiles/.a1.tmp"], "rc": 0, "ok": True}],
        plan_findings=[{"code": "clock-control-none", "level": "info"}],
    )


def full_receipt(**changes: Any) -> dict[str, Any]:
    """A complete valid receipt (k8s sister kind with a target), with some new_receipt arguments changed."""
    kwargs = {**receipt_kwargs(), "kind": "k8s-sister",
              "target": {"pod": "llama-sister-0", "namespace": "serving", "deployment": "llama", "pid": None}}
    return new_receipt(**{**kwargs, **changes})


@pytest.fixture(params=["jsonschema", "stdlib"])
def validator(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with jsonschema, then again with it made unimportable (a GPU host: the stdlib fallback)."""
    if request.param == "stdlib":
        monkeypatch.setitem(sys.modules, "jsonschema", None)
    yield request.param


# -- building ----------------------------------------------------------------------------------------------------
def test_new_receipt_fields_and_derived_values() -> None:
    r = new_receipt(**receipt_kwargs())
    assert (r["schema_version"], r["kind"], r["capture_kind"], r["target"]) == (1, "capture_receipt", "local", None)
    assert r["argv"] == CAPTURE_ARGV  # from the first step named "capture"
    assert r["cleanup_done"] is True
    assert validate_receipt(r) == []


def test_new_receipt_explicit_argv_target_and_failed_cleanup() -> None:
    cleanup = [{"step": "sigint-ncu", "argv": ["kill", "-INT", "1"], "rc": 1, "ok": False}]
    r = full_receipt(argv=["ncu", "--version"], cleanup=cleanup)
    assert r["argv"] == ["ncu", "--version"] and r["cleanup_done"] is False
    assert r["target"] == {"pod": "llama-sister-0", "namespace": "serving", "deployment": "llama"}  # None dropped
    assert new_receipt(**{**receipt_kwargs(), "steps": []})["argv"] is None  # no capture step: no argv
    assert new_receipt(**{**receipt_kwargs(), "target": {"pid": None}})["target"] is None


def test_new_receipt_copies_its_inputs() -> None:
    kwargs = receipt_kwargs()
    r = new_receipt(**kwargs)
    kwargs["steps"][1]["argv"].append("--oops")
    kwargs["kernel_names"].append("other")
    assert r["argv"] == CAPTURE_ARGV and r["steps"][1]["argv"] == CAPTURE_ARGV and r["kernel_names"] == [KERNEL]


def test_receipt_fields_of_run_record_builds_a_valid_receipt() -> None:
    """The call capture run makes (run_record.receipt_fields) produces a receipt the schema accepts."""
    from perfreport.capture.plan.spec import CaptureSpec
    from perfreport.capture.run_record import Step, receipt_fields

    spec = CaptureSpec(kernel_patterns=("regex:nvjet",), campaign="h200-decoder-layer", cell_id="decode-b16")
    plan = SimpleNamespace(spec=spec, findings=[SimpleNamespace(code="clock-control-none", level="info")])
    steps = [Step("capture", CAPTURE_ARGV, 130, "2026-12-02T10:15:03.500Z", "2026-12-02T10:15:08.100Z")]
    r = receipt_fields(plan, mode="attach", versions={"ncu_version": "2025.3.1.0", "gpu_name": "NVIDIA H200",
                                                      "driver_version": "580.159.04", "cuda_version": "13.0"},
                       deployment_revision="7", started=1796206503.25, ended=1796206509.0, kernel_names=[KERNEL],
                       exit_status=130, outputs=[], diagnosis=[], steps=steps, cleanup=[])
    assert validate_receipt(r) == [] and r["argv"] == CAPTURE_ARGV and r["kernel_patterns"] == ["regex:nvjet"]


# -- round trip, determinism, atomicity ---------------------------------------------------------------------------
def test_round_trip_validates(tmp_path: Path, validator: str) -> None:
    r = full_receipt()
    path = tmp_path / "ncu-profiles" / "a1.receipt.json"
    write_receipt(path, r)
    assert load_receipt(path) == r
    assert list(json.loads(path.read_text())) == sorted(r)  # keys sorted by the deterministic writer


def test_same_input_same_bytes(tmp_path: Path) -> None:
    write_receipt(tmp_path / "a.json", full_receipt())
    write_receipt(tmp_path / "b.json", new_receipt(**{**receipt_kwargs(), "kind": "k8s-sister", "target": {
        "deployment": "llama", "namespace": "serving", "pod": "llama-sister-0"}}))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    write_receipt(tmp_path / "a.json", full_receipt())
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_invalid_receipt_writes_nothing_and_keeps_an_old_file(tmp_path: Path) -> None:
    path = tmp_path / "a1.receipt.json"
    write_receipt(path, full_receipt())
    before = path.read_bytes()
    bad = full_receipt()
    bad["steps"][0]["rc"] = "0"
    with pytest.raises(PerfReportError) as exc:
        write_receipt(path, bad)
    assert str(path) in exc.value.message and "steps[0].rc" in exc.value.message and "bug" in exc.value.message
    assert not isinstance(exc.value, InputError)  # our bug, not the user's input
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp left


# -- every required field, bad types ------------------------------------------------------------------------------
@pytest.mark.parametrize("field", json.loads(SCHEMA_PATH.read_text())["required"])
def test_missing_required_field_is_named(field: str, tmp_path: Path, validator: str) -> None:
    r = full_receipt()
    del r[field]
    problems = validate_receipt(r)
    assert problems == [f"{field}: required field is missing"]
    with pytest.raises(PerfReportError, match=rf"{field}: required field is missing"):
        write_receipt(tmp_path / "r.json", r)
    assert not (tmp_path / "r.json").exists()


BAD: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("rc as text", lambda r: r["steps"][1].update(rc="130"), "steps[1].rc: expected integer or null"),
    ("argv item not text", lambda r: r["steps"][0]["argv"].append(7), "steps[0].argv[2]"),
    ("step without started_at", lambda r: r["steps"][2].pop("started_at"), "steps[2].started_at: required"),
    ("unknown step key", lambda r: r["steps"][0].update(pid=1), "steps[0].pid: unknown field"),
    ("bad time", lambda r: r.update(started_at="yesterday"), "started_at"),
    ("time without zone", lambda r: r.update(ended_at="2026-12-02T10:15:09"), "ended_at"),
    ("step time", lambda r: r["steps"][0].update(ended_at="2026-12-02 10:15"), "steps[0].ended_at"),
    ("sha256", lambda r: r["outputs"][0].update(sha256="xyz"), "outputs[0].sha256"),
    ("bytes negative", lambda r: r["outputs"][1].update(bytes=-1), "outputs[1].bytes"),
    ("output without path", lambda r: r["outputs"][0].pop("path"), "outputs[0].path: required"),
    ("cleanup ok as text", lambda r: r["cleanup"][0].update(ok="yes"), "cleanup[0].ok: expected boolean"),
    ("diagnosis code", lambda r: r["diagnosis"][0].update(code=3), "diagnosis[0].code: expected string"),
    ("launch_count 0", lambda r: r.update(launch_count=0), "launch_count"),
    ("launch_skip float", lambda r: r.update(launch_skip=0.5), "launch_skip: expected integer"),
    ("exit_status bool", lambda r: r.update(exit_status=True), "exit_status: expected integer or null, got true"),
    ("kernel_name_base", lambda r: r.update(kernel_name_base="short"), "kernel_name_base"),
    ("replay_mode", lambda r: r.update(replay_mode="app"), "replay_mode"),
    ("capture_kind", lambda r: r.update(capture_kind="k8s"), "capture_kind"),
    ("schema_version", lambda r: r.update(schema_version=2), "schema_version"),
    ("document kind", lambda r: r.update(kind="receipt"), "kind"),
    ("extra top-level field", lambda r: r.update(comment="hi"), "comment: unknown field"),
    ("target pid text", lambda r: r.update(target={"pid": "12"}), "target.pid: expected integer"),
    ("target unknown key", lambda r: r.update(target={"node": "n1"}), "target.node: unknown field"),
    ("argv empty", lambda r: r.update(argv=[]), "argv"),
    ("cell id with a slash", lambda r: r.update(cell_id="a/b"), "cell_id"),
    ("kernel count mismatch", lambda r: r.update(kernels_profiled=2), "kernels_profiled: is 2 but kernel_names"),
    ("cleanup_done lies", lambda r: r.update(cleanup_done=False), "cleanup_done: is False"),
    ("steps not a list", lambda r: r.update(steps={}), "steps: expected array, got an object"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in BAD], ids=[i for i, _, _ in BAD])
def test_bad_values_are_named_by_path(mutate: Callable[[dict[str, Any]], None], expected: str, tmp_path: Path,
                                      validator: str) -> None:
    r = full_receipt()
    mutate(r)
    problems = validate_receipt(r)
    assert any(p.startswith(expected) for p in problems), problems
    with pytest.raises(PerfReportError):
        write_receipt(tmp_path / "r.json", r)
    assert list(tmp_path.iterdir()) == []


def test_validators_agree_on_every_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonschema and the stdlib fallback report the same problems, word for word, for every bad receipt above."""
    for _, mutate, _ in BAD:
        r = full_receipt()
        mutate(r)
        with_js = validate_receipt(r)
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "jsonschema", None)
            without = validate_receipt(copy.deepcopy(r))
        assert with_js == without and with_js


def test_not_an_object(validator: str) -> None:
    assert validate_receipt([1]) == ["(top level): expected object, got an array"]


# -- load_receipt ---------------------------------------------------------------------------------------------------
def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"a1.receipt.json: no such file.*ncu-profiles"):
        load_receipt(tmp_path / "a1.receipt.json")


def test_load_bad_json_not_object_newer_and_invalid(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"schema_version": 1,\n "kind": ')
    with pytest.raises(InputError, match=r"not valid JSON \(line 2, column 10"):
        load_receipt(path)
    path.write_text("[]")
    with pytest.raises(InputError, match="expected a JSON object"):
        load_receipt(path)
    path.write_text(json.dumps({**full_receipt(), "schema_version": 2}))
    with pytest.raises(InputError, match=r"schema_version 2 is newer.*Upgrade perfreport"):
        load_receipt(path)
    bad = full_receipt()
    bad["outputs"][0]["bytes"] = "many"
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"outputs\[0\]\.bytes: expected integer"):
        load_receipt(path)


# -- the schema itself ------------------------------------------------------------------------------------------------
def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    yield from _nodes(sub)
            elif key == "items":
                yield from _nodes(value)


def test_schema_is_valid_2020_12() -> None:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == load_schema()
    assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])


def test_schema_uses_only_what_the_stdlib_fallback_knows_and_types_every_field() -> None:
    schema = load_schema()
    for node in _nodes(schema):
        assert set(node) <= SUPPORTED_KEYWORDS | ANNOTATIONS, set(node) - SUPPORTED_KEYWORDS - ANNOTATIONS
        if "$ref" in node:
            assert set(node) <= {"$ref", "description"}  # the fallback resolves $ref alone
        if node.get("type") in ("object", ["object", "null"]):
            assert node.get("additionalProperties") is False
    for name, prop in schema["properties"].items():
        assert "type" in prop or "$ref" in prop, name


def test_gpu_host_without_jsonschema_writes_and_loads(tmp_path: Path) -> None:
    """On a GPU host (no jsonschema, pandas, duckdb, pydantic) the receipt module still validates and writes."""
    code = (
        "import sys, json\n"
        "for m in ('jsonschema', 'pandas', 'duckdb', 'pydantic'): sys.modules[m] = None\n"
        "from perfreport.bundle.receipt import load_receipt, write_receipt\n"
        "import perfreport.capture.preflight\n"
        f"r = json.loads({json.dumps(json.dumps(full_receipt()))})\n"
        f"write_receipt({str(tmp_path / 'r.json')!r}, r)\n"
        f"assert load_receipt({str(tmp_path / 'r.json')!r}) == r\n"
        "r['steps'][0]['rc'] = 'x'\n"
        "try:\n    write_receipt('unused.json', r)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("PerfReportError") and "steps[0].rc" in out.stdout
    assert not (ROOT / "unused.json").exists()
