"""capture run --bundle DIR into a folder that is not yet a bundle: created as `bundle init` makes one (same files,
same inference_perfbench_v1.json), so import_ncu --bundle DIR of its output works; a file or a foreign folder is
refused before ncu runs. ncu is tests/data/fake_ncu (real H200 ncu 2025.3.1 output replayed, a real .ncu-rep).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import run_cli

from perfreport.bundle.layout import BUNDLE_JSON, MARKDOWN_FILES, bundle_init

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "data" / "fake_ncu"
NCU, SMI = str(FAKE / "ncu"), str(FAKE / "nvidia-smi")
RUN1 = ROOT / "tests" / "data" / "h200_capture" / "run1" / "bundle" / "ncu-profiles"


def run_args(bundle: Path, *extra: str) -> list[str]:
    return ["capture", "run", "--bundle", str(bundle), "--ncu", NCU, "--nvidia-smi", SMI, "--mode",
            "launch-and-attach", "--kernel-name", "regex:nvjet", "--output", "g", *extra, "--", "python3", "x.py"]


def test_new_folder_becomes_a_bundle_like_bundle_init_and_imports(fake_ncu: Path, tmp_path: Path,
                                                                   campaign: Path) -> None:
    bundle = tmp_path / "deep" / "h200-decode"
    code, out = run_cli(*run_args(bundle), ok=True)
    assert f"created bundle {bundle}" in out
    (tmp_path / "ref").mkdir()
    made = bundle_init(tmp_path / "ref", "h200-decode")  # what `bundle init` writes, for comparison
    for name in (BUNDLE_JSON, *MARKDOWN_FILES):
        assert (bundle / name).read_text() == (made / name).read_text(), name
    assert json.loads((bundle / BUNDLE_JSON).read_text())["bundle_id"] == "h200-decode"
    assert (bundle / "ncu-profiles" / "g.ncu-rep").is_file() and (bundle / "ncu-profiles" / "g.receipt.json").is_file()
    assert not list(bundle.parent.glob(".*.tmp"))
    code, out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(bundle),
                        ok=True)
    cell = json.loads((campaign / "cells" / "c1" / "ncu_kernels.json").read_text())
    assert cell["kernels"] and cell["kernels"][0]["function"].startswith("nvjet_sm90")


def test_empty_folder_is_made_a_bundle_and_an_existing_bundle_is_kept(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b1"
    bundle.mkdir()
    code, out = run_cli(*run_args(bundle), ok=True)
    assert "created bundle" in out and (bundle / BUNDLE_JSON).is_file()
    made = bundle_init(tmp_path, "b2")
    (made / BUNDLE_JSON).write_text((made / BUNDLE_JSON).read_text().replace('"context": {}', '"context": {"x": 1}'))
    before = (made / BUNDLE_JSON).read_text()
    code, out = run_cli(*run_args(made), ok=True)
    assert "created bundle" not in out and (made / BUNDLE_JSON).read_text() == before


def test_a_file_or_a_foreign_folder_is_refused_before_any_capture(fake_ncu: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    code, out = run_cli(*run_args(a_file))
    assert code == 2 and "is a file, not a folder" in out and "Pass another --bundle" in out
    foreign = tmp_path / "src"
    foreign.mkdir()
    (foreign / "main.py").write_text("")
    code, out = run_cli(*run_args(foreign))
    assert code == 2 and "not an evidence bundle" in out and "bundle init" in out
    assert len([line for line in out.strip().splitlines() if "--bundle" in line]) == 1  # one line
    assert sorted(p.name for p in foreign.iterdir()) == ["main.py"]
    assert a_file.read_text() == "x" and not fake_ncu.exists()  # ncu never ran


def test_after_basic_is_refused_without_the_basic_receipt_in_the_bundle(fake_ncu: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    full = run_args(bundle, "--set", "full", "--after-basic", "--output", "full")
    code, out = run_cli(*full)
    assert code == 2 and "refused by the capture policy" in out and "after-basic-unproven" in out
    assert "--after-basic says a basic capture of --kernel-name regex:nvjet came first" in out
    assert "holds no capture receipt" in out and f"capture run --bundle {bundle} --set basic --kernel-name" in out
    assert not fake_ncu.exists()  # ncu never ran
    # a basic receipt of another kernel proves nothing for this one (the H200 run1 receipt, pattern edited)
    profiles = bundle / "ncu-profiles"
    receipt = json.loads((RUN1 / "gemm_bf16_basic.receipt.json").read_text())
    (profiles / "flash_basic.receipt.json").write_text(json.dumps({**receipt, "kernel_patterns": ["regex:flash"]}))
    code, out = run_cli(*full)
    assert code == 2 and "basic ones with a profiled kernel for regex:flash" in out and not fake_ncu.exists()
    # the real basic receipt of regex:nvjet (H200, tests/data/h200_capture/run1) lets the full capture run
    shutil.copy(RUN1 / "gemm_bf16_basic.receipt.json", profiles)
    run_cli(*full, ok=True)
    assert (profiles / "full.receipt.json").is_file() and fake_ncu.exists()
