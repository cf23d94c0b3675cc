"""Section sets per ncu version (metrics.yaml section_sets_before, catalog/sets.py) on real reports of ncu 2020.3
to 2024.3 (tests/data/wild/, each with its SOURCE.txt and LICENSE.txt): "basic" is said only of basic captures.

The LaunchStats + Occupancy + SpeedOfLight reports (mojo-1660ti, ncu 2022.4.0, no --set on its command line) are
`basic`: before 2024.1 ncu's basic set (its default) was exactly those three sections (--list-sets printed
"basic  LaunchStats, Occupancy, SpeedOfLight  yes  45"); WorkloadDistribution joined basic in 2024.1. The same three
sections from ncu 2025.3 are custom.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, write_config

from perfreport.ncu.catalog.sets import infer_section_set, sets_for_version
from perfreport.ncu.read import read_export

WILD = Path(__file__).resolve().parent / "data" / "wild"
REPORTS = {  # folder/file: (ncu version, set)
    "speedy-scan-3070/thedavidchu_profile.ncu-rep": ("2020.3.1.0", "full"),
    "indexspaces/indexspaces_profile.ncu-rep.gz": ("2022.4.0.0", "full"),
    "hyperspec-2060mq/MgMap_profile.ncu-rep": ("2024.3.2.0", "basic"),
    "mojo-1660ti/josiahls_profile.ncu-rep": ("2022.4.0.0", "basic"),
}
THREE = ["LaunchStats", "Occupancy", "SpeedOfLight"]


@pytest.mark.parametrize("rel", sorted(REPORTS))
def test_wild_reports_are_recognised_by_their_own_versions_sets(rel: str) -> None:
    path = WILD / rel
    assert (path.parent / "SOURCE.txt").is_file() and (path.parent / "LICENSE.txt").is_file()
    capture = read_export(path)
    version, expected = REPORTS[rel]
    assert capture.ncu_version == version
    assert capture.section_set == expected
    assert infer_section_set(capture.sections, ncu_version=capture.ncu_version) == expected


def test_the_speedy_scan_full_report_has_2020_3s_thirteen_sections() -> None:
    capture = read_export(WILD / "speedy-scan-3070" / "thedavidchu_profile.ncu-rep")
    assert len(capture.sections) == 13 and "Nvlink" in capture.sections and capture.command_line is None


def test_a_set_is_judged_by_the_captures_version() -> None:
    assert infer_section_set(THREE, ncu_version="2022.3.0.0") == "basic"
    assert infer_section_set(THREE, ncu_version="2025.3.1.0") == "custom"  # basic has WorkloadDistribution
    assert infer_section_set([*THREE, "WorkloadDistribution"], ncu_version="2024.3.2.0") == "basic"
    assert infer_section_set([*THREE, "WorkloadDistribution"], ncu_version="2022.4.0.0") == "custom"
    full_2020 = read_export(WILD / "speedy-scan-3070" / "thedavidchu_profile.ncu-rep").sections
    assert infer_section_set(full_2020, ncu_version="2025.3.1.0") == "custom"  # not the newest full set
    assert infer_section_set(full_2020) == "full"  # version unknown: every version's sets, largest first
    assert infer_section_set(THREE) == "basic"
    assert len(sets_for_version(None)) > 1 and len(sets_for_version("2019.5.0")) == 1  # older: the oldest list


@pytest.mark.parametrize(("rel", "hardware"), [("speedy-scan-3070/thedavidchu_profile.ncu-rep", "rtx3070_sm86"),
                                             ("indexspaces/indexspaces_profile.ncu-rep.gz", "a40_sm86")])
def test_import_never_calls_a_full_report_basic(rel: str, hardware: str, tmp_path: Path) -> None:
    campaign = write_config(tmp_path / "camp", hardware=hardware)  # the capture's own GPU
    code, out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(WILD / rel))
    assert code == 0, out
    assert "set full" in out and "basic set" not in out and "section set basic" not in out
    cell = json.loads((campaign / "cells" / "c1" / "ncu_kernels.json").read_text())
    assert cell["sources"][0]["section_set"] == "full"
    assert all("basic set" not in str(w) for w in cell.get("warnings", []))


def test_bound_reason_of_a_full_report_never_says_basic_set(tmp_path: Path) -> None:
    campaign = write_config(tmp_path / "camp", hardware="a40_sm86")
    rel = "indexspaces/indexspaces_profile.ncu-rep.gz"
    run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(WILD / rel), ok=True)
    cell = json.loads((campaign / "cells" / "c1" / "ncu_kernels.json").read_text())
    assert all("basic set" not in (k.get("bound_reason") or "") for k in cell["kernels"])
