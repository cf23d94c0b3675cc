"""Golden outputs: import real captures and compare ncu_kernels.json with tests/golden/<case>/ (parsed, approx).

Regenerate after an intended change, then review the diff:
    PERFREPORT_REGEN_GOLDEN=1 .venv/bin/pytest tests/test_golden.py && git diff tests/golden
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config

from perfreport.ncu.importer import import_ncu

TESTS = Path(__file__).parent
GOLDEN = TESTS / "golden"
CAMPAIGN_CAPTURES = TESTS.parent / "campaigns" / "h200-decoder-layer" / "captures"
CASES = {
    "oracle_full": TESTS / "data/h200_oracle/oracle_full.ncu-rep.gz",
    "oracle_basic": TESTS / "data/h200_oracle/oracle_basic.ncu-rep.gz",
    "prefill_layer_full": CAMPAIGN_CAPTURES / "prefill/layer_full.ncu-rep.gz",
    "decode_layer_full": CAMPAIGN_CAPTURES / "decode/layer_full.ncu-rep.gz",
}


def _approx(actual: Any, expected: Any, path: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(actual) == sorted(expected), path
        for k in expected:
            _approx(actual[k], expected[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _approx(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-12), path
    else:
        assert actual == expected, path


@pytest.mark.parametrize("case", sorted(CASES))
def test_import_matches_the_golden_ncu_kernels_json(case: str, tmp_path: Path) -> None:
    camp = write_config(tmp_path / "c", campaign="golden", cells=[{"id": case}])
    result = import_ncu(camp, case, CASES[case])
    actual = json.loads(result.path.read_text())
    golden = GOLDEN / case / "ncu_kernels.json"
    if os.environ.get("PERFREPORT_REGEN_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(result.path, golden)
    expected = json.loads(golden.read_text())
    _approx(actual, expected)
