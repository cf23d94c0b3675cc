"""Incremental render (issue 32, point 2): a page whose inputs digest is the one the last render recorded in the site's
site.json is kept as written, the others are built; the result is byte-identical to a cold render of the same data.

Real data: the example campaign's H200 captures (conftest.copy_example), and 60 cells of real H200 kernel rows
(tests/golden, via test_lake_concurrency.synthetic_campaign) for the page counts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import copy_example, run_cli
from test_lake_concurrency import synthetic_campaign

import perfreport.site.render as render
from perfreport.site.render import report_render

CELL = "decode-b16-kv2048"


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _keyed(result: render.RenderResult) -> dict[str, dict[str, object]]:
    built = json.loads((result.campaign_site / "site.json").read_text())["built"]
    assert isinstance(built, dict)
    return built


def _rewrite_times(cell_dir: Path, factor: float) -> None:
    """What re-importing the cell's kernel times from a new trace changes: its kernel_times.json."""
    path = cell_dir / "kernel_times.json"
    doc = json.loads(path.read_text())
    doc["kernels"][0]["total_ns"] = int(doc["kernels"][0]["total_ns"] * factor)
    path.write_text(json.dumps(doc))


def _rewrite_kernels(cell_dir: Path, factor: float) -> None:
    """What re-importing the cell from a new capture changes: its ncu_kernels.json (one kernel slower)."""
    path = cell_dir / "ncu_kernels.json"
    doc = json.loads(path.read_text())
    doc["kernels"][0]["duration_ns"] *= factor
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_example(tmp_path_factory.mktemp("incremental") / "h200-decoder-layer")


def test_a_render_of_unchanged_data_keeps_every_cell_page_and_writes_the_same_bytes(example: Path,
                                                                                  tmp_path: Path) -> None:
    camp = tmp_path / example.name
    shutil.copytree(example, camp)
    cold = report_render(camp, tmp_path / "site")
    before = _tree(tmp_path / "site")
    again = report_render(camp, tmp_path / "site")
    keyed = _keyed(cold)
    # every cell page, comparison page and kernel page; pages 01-08 read every cell and are built each time
    assert sorted(keyed) == sorted(p.name for p, _ in cold.pages if not p.name[:2].isdigit())
    assert (cold.kept, again.kept) == (0, len(keyed))
    assert _tree(tmp_path / "site") == before


def test_after_one_cell_changes_only_its_pages_are_built_and_the_site_is_a_cold_render(example: Path,
                                                                                      tmp_path: Path) -> None:
    camp = tmp_path / example.name
    shutil.copytree(example, camp)
    first = _keyed(report_render(camp, tmp_path / "site"))
    _rewrite_times(camp / "cells" / CELL, 1.5)
    second = report_render(camp, tmp_path / "site")
    rebuilt = {name for name, entry in _keyed(second).items() if entry["inputs"] != first[name]["inputs"]}
    assert f"cell-{CELL}.html" in rebuilt and f"kernel-{CELL}.html" in rebuilt
    assert not any(name.endswith(f"-{other}.html") for name in rebuilt
                   for other in ("prefill-b8-s1024", "prefill-b8-s1024-attach"))
    assert second.kept == len(_keyed(second)) - len(rebuilt)
    cold = report_render(camp, tmp_path / "cold")
    assert cold.kept == 0
    assert _tree(tmp_path / "site") == _tree(tmp_path / "cold")  # byte for byte, site.json and index.html too


def test_a_code_change_or_a_missing_file_builds_the_page_again(example: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    camp = tmp_path / example.name
    shutil.copytree(example, camp)
    first = report_render(camp, tmp_path / "site")
    (first.campaign_site / f"kernel-{CELL}.html").unlink()  # removed by hand: that page is built again
    again = report_render(camp, tmp_path / "site")
    assert again.kept == len(_keyed(first)) - 1 and (again.campaign_site / f"kernel-{CELL}.html").is_file()
    monkeypatch.setattr(render, "code_digest", lambda: "another version of the code")
    assert report_render(camp, tmp_path / "site").kept == 0
    monkeypatch.undo()
    assert report_render(camp, tmp_path / "site").kept == 0  # its digests were the other code's
    report_render(camp, tmp_path / "cold")
    assert _tree(tmp_path / "site") == _tree(tmp_path / "cold")


def test_on_sixty_cells_one_changed_cell_rebuilds_its_two_pages_and_its_comparisons(tmp_path: Path) -> None:
    camp = synthetic_campaign(tmp_path / "long-campaign", cells=60, kernels=6)
    first = _keyed(report_render(camp, tmp_path / "site"))
    cell = sorted(p.name for p in (camp / "cells").iterdir())[7]
    _rewrite_kernels(camp / "cells" / cell, 2.0)
    second = report_render(camp, tmp_path / "site")
    keyed = _keyed(second)
    rebuilt = sorted(n for n in keyed if keyed[n]["inputs"] != first[n]["inputs"])
    compares = [n for n in rebuilt if n.startswith("compare-")]
    assert rebuilt == sorted([*compares, f"cell-{cell}.html", f"kernel-{cell}.html"]) and compares
    assert second.kept == len(keyed) - len(rebuilt)
    assert len(keyed) == 60 + 60 + len([n for n in keyed if n.startswith("compare-")])
    report_render(camp, tmp_path / "cold")
    assert _tree(tmp_path / "site") == _tree(tmp_path / "cold")


def test_the_cli_says_how_many_pages_it_kept(example: Path, tmp_path: Path) -> None:
    camp = tmp_path / example.name
    shutil.copytree(example, camp)
    site = str(tmp_path / "site")
    first = run_cli("report_render", "--campaign", str(camp), "--out", site, ok=True)
    assert "kept from the last render" not in first.output
    again = run_cli("report_render", "--campaign", str(camp), "--out", site, ok=True)
    keyed = len(json.loads((tmp_path / "site" / camp.name / "site.json").read_text())["built"])
    pages = len(json.loads((tmp_path / "site" / camp.name / "site.json").read_text())["pages"])
    assert f"; {keyed} of {pages} pages kept from the last render (their inputs unchanged)" in again.output
    as_json = json.loads(run_cli("report_render", "--campaign", str(camp), "--out", site, "--format", "json",
                                 ok=True).output)
    assert as_json["kept"] == keyed
