"""The one validation engine (perfreport/config/validate.py): packaged schemas, problem lines, one fallback.

Each case runs with jsonschema and again with it unimportable (a GPU host): both must give the same lines.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from perfreport.config import validate
from perfreport.errors import PerfReportError

TESTS = Path(__file__).parent
GOLDEN_NCU = TESTS / "golden" / "decode_layer_full" / "ncu_kernels.json"
LEVERS = TESTS.parent / "campaigns" / "h200-decoder-layer" / "levers.yaml"


@pytest.fixture(params=["jsonschema", "stdlib"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with jsonschema, then with it made unimportable (the stdlib fallback)."""
    if request.param == "stdlib":
        monkeypatch.setitem(sys.modules, "jsonschema", None)
    yield request.param


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN_NCU.read_text(encoding="utf-8"))
    return data


def test_load_schema_by_name_is_cached() -> None:
    schema = validate.load_schema("levers")
    assert schema is validate.load_schema("levers") is validate.load_schema("levers.schema.json")
    assert schema["$id"].endswith("levers.schema.json")


def test_real_documents_are_valid(engine: str) -> None:
    assert validate.check(_golden(), "ncu_kernels") == []
    assert validate.check(yaml.safe_load(LEVERS.read_text(encoding="utf-8")), "levers") == []


def test_problems_name_path_expected_and_got_in_path_order(engine: str) -> None:
    data = _golden()
    data["kernels"][1]["duration_ns"] = "fast"
    data["kernels"][0]["launch_ids"] = []
    del data["kernels"][0]["bound"]
    data["kernels"][0]["arithmetic_intensity"] = -1.0
    data["sources"][0]["sha256"] = "xyz"
    data["extra"] = 1
    assert validate.check(data, "ncu_kernels") == [
        "extra: unknown field",
        "kernels[0].arithmetic_intensity: expected exactly one of the forms the schema allows, got -1.0",
        "kernels[0].bound: required field is missing",
        "kernels[0].launch_ids: expected at least 1 item(s), got an array",
        'kernels[1].duration_ns: expected number or null, got "fast"',
        'sources[0].sha256: expected a string matching ^[0-9a-f]{64}$, got "xyz"',
    ]


def test_each_keyword_in_words(engine: str) -> None:
    doc = {"schema_version": 2, "sol_wall": "high", "levers": [{
        "id": "a b", "lever": "", "kernel": "gemm", "cost": "cheap", "gate": "g", "status": "open",
        "unlock": {"direction": "faster", "fraction": 0}, "evidence": [], "surprise": True}]}
    lines = validate.check(doc, "levers")
    assert "levers[0].surprise: unknown field" in lines
    assert any(line.startswith("levers[0].unlock.fraction: expected ") and line.endswith(", got 0")
               for line in lines), lines
    assert any(line.startswith("levers[0].cost: expected ") and line.endswith('got "cheap"') for line in lines)
    assert any(line.startswith("schema_version: expected ") and line.endswith("got 2") for line in lines)
    assert lines == sorted(lines, key=lambda line: line.split(":")[0].replace("[0]", "0"))


def test_not_an_object(engine: str) -> None:
    assert validate.check([1], "kernel_times") == ["(top level): expected object, got an array"]


def test_engines_agree_word_for_word(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = _golden()
    bad["kernels"][2].update(family=3, sol_ceiling_key="nodots", warp_stalls_pct={"barrier": "x"}, launches=0)
    bad["kernels"][3]["flops"] = {"tensor": 1.0}
    with_js = validate.check(bad, "ncu_kernels")
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "jsonschema", None)
        without = validate.check(copy.deepcopy(bad), "ncu_kernels")
    assert with_js == without
    assert with_js == [
        "kernels[2].family: expected string, got 3",
        "kernels[2].launches: expected a number >= 1, got 0",
        'kernels[2].sol_ceiling_key: expected a string matching ^[A-Za-z0-9_]+\\.[A-Za-z0-9_.]+$, got "nodots"',
        'kernels[2].warp_stalls_pct.barrier: expected number or null, got "x"',
        "kernels[3].flops: expected exactly one of the forms the schema allows, got an object",
    ]


def test_fallback_refuses_a_keyword_it_does_not_check() -> None:
    schema = {"$id": "probe.schema.json", "anyOf": [{"type": "string"}, {"type": "null"}]}
    with pytest.raises(PerfReportError, match=r"probe.schema.json: keyword\(s\) \['anyOf'\] are not checked "
                                              r"without jsonschema; install it"):
        list(validate._fallback("x", schema))


def test_every_packaged_schema_is_within_the_fallback() -> None:
    schemas = sorted(p.name for p in (Path(validate.__file__).parent / "schemas").glob("*.schema.json"))
    assert len(schemas) == 7
    for name in schemas:
        assert not _unchecked(validate.load_schema(name)), name


def _unchecked(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_unchecked(n) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    out = set(node) - validate.CHECKED - validate.ANNOTATIONS
    for key, value in node.items():
        if key in ("properties", "$defs"):
            out |= set().union(*(_unchecked(v) for v in value.values())) if value else set()
        elif key in ("items", "additionalProperties", "if", "then", "oneOf", "allOf"):
            out |= _unchecked(value)
    return out


def test_fallback_checks_max_items() -> None:
    """maxItems (a 95% CI is [low, high]: kernel rows' pct_of_achievable_ci) is checked without jsonschema too."""
    schema = {"$id": "probe.schema.json", "type": "array", "maxItems": 2}
    assert [p.message for p in validate._fallback([1.0, 2.0, 3.0], schema)] == [
        "expected at most 2 item(s), got an array"]
    assert list(validate._fallback([1.0, 2.0], schema)) == []
