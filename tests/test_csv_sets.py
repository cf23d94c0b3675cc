"""One section-set table (metrics.yaml) and one inference (catalog/sets.py), held to the real captures."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from perfreport.ncu.catalog.sets import display_name, infer_section_set, section_table
from perfreport.ncu.csv.read import read_csv_export
from perfreport.ncu.rep.reader import read_rep

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("report", "expected"), [
    ("h200_oracle/oracle_basic.ncu-rep.gz", "basic"),
    ("h200_rep_layouts/detailed.ncu-rep.gz", "detailed"),
    ("h200_rep_layouts/roofline.ncu-rep.gz", "roofline"),
    ("h200_oracle/oracle_full.ncu-rep.gz", "full"),
])
def test_the_table_lists_each_sets_sections_as_the_reports_hold_them(report: str, expected: str) -> None:
    capture = read_rep(DATA / report)
    assert sorted(section_table().sets[expected]) == capture.sections
    assert infer_section_set(capture.sections) == expected


def test_a_metrics_list_report_is_custom() -> None:
    capture = read_rep(DATA / "h200_rep_layouts" / "metrics.ncu-rep.gz")
    assert capture.sections == ["section0"] and capture.section_set == "custom"


def _columns(path: Path) -> list[str]:
    with path.open(newline="") as fh:
        return next(csv.reader(fh))


@pytest.mark.parametrize(("page", "expected"), [
    ("h200_oracle/oracle_basic-raw.csv", "basic"),
    ("h200_oracle/oracle_full-raw.csv", "full"),
    ("h200_shared/attn_basic-raw.csv", "basic"),
    ("h200_shared/gemm_full-raw.csv", "full"),
    # a --metrics list (metrics.log): launch__*, occupancy limits and gpu__time_duration come with any capture
    ("h200_rep_layouts/metrics-raw.csv", None),
])
def test_a_raw_page_set_comes_from_marker_columns(page: str, expected: str | None) -> None:
    assert infer_section_set(metrics=_columns(DATA / page)) == expected
    assert read_csv_export(DATA / page).section_set == expected


@pytest.mark.parametrize(("page", "expected"), [
    ("h200_oracle/oracle_basic-details.csv", "basic"),
    ("h200_oracle/oracle_full-details.csv", "full"),
    ("h200_many/many_full-details.csv", "full"),
    ("h200_shared/gemm_full-sol.csv", None),  # `--section SpeedOfLight` export of a full capture
])
def test_a_details_page_set_comes_from_its_section_names(page: str, expected: str | None) -> None:
    assert read_csv_export(DATA / page).section_set == expected


def test_a_roofline_details_page_shows_only_speed_of_light_and_workload_distribution() -> None:
    shown = ["GPU Speed Of Light Throughput", "GPU and Memory Workload Distribution"]
    assert infer_section_set(displayed=shown) == "roofline"
    assert infer_section_set(displayed=[*shown, "Launch Statistics", "Occupancy"]) == "basic"
    assert infer_section_set(displayed=["Command line profiler metrics"]) is None


def test_the_command_line_wins_and_nothing_known_is_none() -> None:
    assert infer_section_set(["LaunchStats"], "ncu --set full -o r app") == "full"
    assert infer_section_set([]) is None and infer_section_set(metrics=[]) is None


def test_rule_rows_name_sections_by_identifier() -> None:
    assert display_name("SpeedOfLight_RooflineChart") == "GPU Speed Of Light Roofline Chart"
    assert display_name("WorkloadDistribution") == "GPU and Memory Workload Distribution"
    assert display_name("C2CLink") == "C2CLink"
