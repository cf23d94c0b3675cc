"""Issue 30, points 1 and 2: one roof per number, and rankings that say what they rest on.

Every % of a roof names the roof next to it (page 5: the datasheet roof at the kernel's AI; page 7 and value_view: the
measured roof where one is measured, else the datasheet's), and the same kernel shows the same number for the same
roof on every page. Measured savings (an imported timeline's time share) rank before estimates (no time share: the
ncu duration share, an upper bound); cells are put on one base (each cell's weight, stated) before they are ranked
together; a kernel missing from its cell's timeline is said to be missing from it; a timeline whose time mostly
matches no captured kernel is warned about by name. All on the real example campaign.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLE, run_cli
from test_lake import make_campaign as _campaign

from perfreport.frontier.value_view import value_view, view_json
from perfreport.site.campaign_pages import frontier_page, roofline_page
from perfreport.warehouse.gather import gather

DECODE, PREFILL = "decode-b16-kv2048", "prefill-b8-s1024"
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _campaign(tmp_path_factory.mktemp("rank") / EXAMPLE.name)


def _rows(table: Any) -> list[dict[str, Any]]:
    return list(table.rows)


def test_every_percentage_names_its_roof_and_agrees_across_pages(example: Path) -> None:
    data = gather(example)
    join = {(r["cell_id"], r["kernel_id"]): r for r in data.join if r.get("kernel_id")}
    page7 = frontier_page(data)
    kernels = page7.tables["kernels"]
    headers = [c.label for c in kernels.columns]
    assert headers[headers.index("% of roof") + 1] == "against the roof"  # the roof right next to the number
    kinds = set()
    for row in _rows(kernels):
        if row["pct_of_roof"] is None:
            continue
        source = join[(row["cell_id"], row["kernel_id"])]
        kind, _, key = row["against"].partition(" roof ")
        kinds.add(kind)
        if kind == "measured":
            assert key == source["achievable_key"] and row["pct_of_roof"] == pytest.approx(source["pct_of_achievable"])
        else:
            assert kind == "datasheet" and key == source["sol_ceiling_key"]
            assert row["pct_of_roof"] == pytest.approx(source["sol_pct"])
    assert kinds == {"measured"}  # the H200 has measured ceilings for every ranked kernel of the example
    page5 = roofline_page(data)
    points = page5.tables["points"]
    assert [c.label for c in points.columns if c.key == "pct_of_roof"] == ["% of datasheet roof at its AI"]
    for p in _rows(points):  # the datasheet number of page 5 is the kernel's %SoL (the datasheet roof) everywhere
        if p["pct_of_roof"] is not None and p["sol_pct"] is not None:
            assert p["pct_of_roof"] == p["sol_pct"]
    view = view_json(value_view(example))
    for k in view["kernels"]:
        assert k["pct_of_roof"] is None or k["roof"] in ("measured", "datasheet")
        if k["roof"] == "measured":
            assert k["pct_of_roof"] == pytest.approx(join[(k["cell_id"], k["kernel_id"])]["pct_of_achievable"])


def test_an_untimed_cell_never_outranks_measured_shares(tmp_path: Path) -> None:
    def no_decode_timeline(doc: dict[str, Any]) -> None:
        doc["cells"][1]["timelines"] = []

    camp = _campaign(tmp_path / EXAMPLE.name, no_decode_timeline)
    view = value_view(camp)
    savings = [(k.cell_id, k.saving) for k in view.kernels if k.saved_pct]
    assert {s for c, s in savings if c == DECODE} == {"estimate"}
    assert {s for c, s in savings if c == PREFILL} == {"measured"}
    kinds = [s for _, s in savings]
    assert kinds == sorted(kinds, key=["measured", "estimate"].index)  # every measured saving first
    biggest_estimate = max(k.saved_pct or 0 for k in view.kernels if k.saving == "estimate")
    smallest_measured = min(k.saved_pct for k in view.kernels if k.saving == "measured" and k.saved_pct)
    assert biggest_estimate > smallest_measured  # ranked by what it rests on, not by size alone
    estimate = next(k for k in view.kernels if k.saving == "estimate")
    assert "no timeline imported for this cell" in estimate.basis and "an upper bound" in estimate.basis
    assert "an estimate, not measured" in estimate.headline() or estimate.saved_pct is None
    assert view.next_lever.startswith(next(k for k in view.kernels if k.saved_pct).label)
    assert "measured:" in view.next_lever


def test_cells_are_ranked_on_one_base_with_their_weights_stated(tmp_path: Path) -> None:
    def weighted(doc: dict[str, Any]) -> None:
        doc["cells"][0]["weight"] = 9  # prefill stands for 9x the fleet time of decode
        doc["cells"][1]["weight"] = 1

    camp = _campaign(tmp_path / EXAMPLE.name, weighted)
    view = value_view(camp)
    weight = {k.cell_id: k.cell_weight for k in view.kernels}
    assert weight == {PREFILL: pytest.approx(0.9), DECODE: pytest.approx(0.1)}
    measured = [k for k in view.kernels if k.saving == "measured"]
    for k in measured:
        assert k.campaign_saved_pct == pytest.approx(k.saved_pct * weight[k.cell_id])
    on_base = [k.campaign_saved_pct for k in measured]
    assert on_base == sorted(on_base, reverse=True)
    assert measured[0].cell_id == PREFILL  # decode's larger own % (4x prefill's) weighs a tenth
    page = frontier_page(gather(camp))
    table = page.tables["kernels"]
    assert "each cell's saving x its weight (" in table.note and "; from each cell's `weight:` in config.yaml)" \
        in table.note and f"{PREFILL} 90%" in table.note and f"{DECODE} 10%" in table.note
    equal = value_view(_campaign(tmp_path / "equal" / EXAMPLE.name))
    assert {k.cell_weight for k in equal.kernels} == {0.5}


def test_a_bad_weight_is_refused(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    doc = yaml.safe_load((camp / "config.yaml").read_text())
    doc["cells"][0]["weight"] = -1
    (camp / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert "cells[0].weight: expected a number > 0 (this cell's share of the fleet's GPU time, any scale), got -1" \
        in " ".join(out.split())


def test_a_kernel_missing_from_its_cells_timeline_is_said_to_be(tmp_path: Path) -> None:
    camp = _campaign(tmp_path / EXAMPLE.name)
    times = camp / "cells" / DECODE / "kernel_times.json"
    doc = json.loads(times.read_text())
    dropped = next(r["function"] for r in doc["kernels"] if r["function"].startswith("nvjet"))
    doc["kernels"] = [r for r in doc["kernels"] if r["function"] != dropped]
    times.write_text(json.dumps(doc))
    view = value_view(camp)
    missing = [k for k in view.kernels if k.cell_id == DECODE and k.function == dropped]
    assert missing and all(k.saving == "estimate" for k in missing)
    assert all("not in the cell's imported timeline" in k.basis for k in missing)
    assert not any("no timeline imported" in k.basis for k in view.kernels if k.cell_id == DECODE)


def test_a_timeline_of_other_kernels_warns_with_their_names(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    run_cli("import_ncu", "--campaign", str(camp), "--cell-id", DECODE, "--bundle",
            str(camp / "captures" / "decode" / "layer_full.ncu-rep.gz"), ok=True)
    same = run_cli("import_torch_trace", "--campaign", str(camp), "--cell-id", DECODE,
                   str(camp / "captures" / "decode" / "torch_trace.json.gz"), ok=True).output
    assert "matches no kernel ncu captured" not in same
    other = DATA / "nsys" / "dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv"  # another workload's kernels
    out = " ".join(run_cli("import_nsys", "--campaign", str(camp), "--cell-id", DECODE, str(other),
                           ok=True).output.split())
    assert f"'{other.name}': 100% of its kernel time" in out
    assert f"matches no kernel ncu captured in cell {DECODE}:" in out and " ms and " in out
    assert "check that the timeline and the ncu capture ran the same workload" in out
