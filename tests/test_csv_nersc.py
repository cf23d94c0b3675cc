"""NERSC roofline recipe: one `ncu --csv --metrics M` file per metric, merged into one source by launch ID.

The fixtures are real: tests/data/h100_kinds/nersc/nersc_metric_*.csv, four runs of the same six launches on an H100
(ncu 2025.3.1), each file one metric, each starting with the `==PROF==` lines ncu printed before the CSV. The
expected numbers are read here with the csv module, independently of the readers under test.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shlex
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import run_cli, write_config

from perfreport.errors import InputError
from perfreport.kernels.cells import load_schema
from perfreport.ncu.csv import merge
from perfreport.ncu.model import Capture
from perfreport.ncu.read import read_export
from perfreport.warehouse.campaign_import import import_campaign

NERSC = Path(__file__).parent / "data" / "h100_kinds" / "nersc"
CYCLES, HZ = "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second"
FFMA, DRAM = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "dram__bytes.sum"
METRICS = (DRAM, CYCLES, HZ, FFMA)  # sorted by file name
FILES = [NERSC / f"nersc_metric_{m}.csv" for m in METRICS]


def _rows(path: Path) -> list[dict[str, str]]:
    """The CSV rows of an ncu stdout capture: the `==PROF==` lines before the header dropped."""
    lines = [line for line in path.read_text().splitlines() if line.startswith('"')]
    return list(csv.DictReader(lines))


def _values(path: Path) -> dict[int, float]:
    """launch ID -> the file's one metric value, as printed (thousands separators removed)."""
    return {int(r["ID"]): float(r["Metric Value"].replace(",", "")) for r in _rows(path)}


def _names(path: Path) -> dict[int, str]:
    return {int(r["ID"]): r["Kernel Name"] for r in _rows(path)}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bundles(paths: list[Path]) -> list[str]:
    return [arg for p in paths for arg in ("--bundle", str(p))]


def _import(campaign: Path, paths: list[Path], ok: bool | None = True) -> str:
    return run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", *_bundles(paths), ok=ok).output


def _cell(campaign: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((campaign / "cells/c1/ncu_kernels.json").read_text())


def _copies(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "runs"
    folder.mkdir()
    return [Path(shutil.copy(p, folder)) for p in FILES]


def _merge(paths: list[Path]) -> Capture:
    return merge.merge_per_metric([(p.name, read_export(p)) for p in paths])


def test_each_fixture_is_a_per_metric_file_and_the_all_metrics_run_is_not() -> None:
    for path, metric in zip(FILES, METRICS, strict=True):
        found = merge.per_metric(path, read_export(path))
        assert found is not None and found.metric == metric
        assert [int(i) for i, _ in found.launches] == list(range(6))
    everything = NERSC / "nersc_all.csv"
    assert merge.per_metric(everything, read_export(everything)) is None


def test_four_per_metric_files_merge_into_six_launches_with_every_value() -> None:
    capture = _merge(FILES)
    assert capture.source_format == "csv-details" and len(capture.launches) == 6
    assert [k.launch_id for k in capture.launches] == list(range(6))
    names = _names(FILES[0])
    assert [k.name for k in capture.launches] == [names[i] for i in range(6)]
    for path, metric in zip(FILES, METRICS, strict=True):
        expected = _values(path)
        assert {k.launch_id: k.metrics[metric] for k in capture.launches} == pytest.approx(expected)
    fma = next(k for k in capture.launches if k.launch_id == 2)
    assert fma.function == "fma_loop_kernel" and fma.metrics[FFMA] == 2**31  # 2,147,483,648 as printed
    # the listing hash: the same files, in any order, give the same sha256
    listing = "".join(f"{_sha(p)}  {p.name}\n" for p in sorted(FILES, key=lambda p: p.name))
    assert capture.sha256 == hashlib.sha256(listing.encode()).hexdigest() == _merge(FILES[::-1]).sha256


def test_merged_import_writes_one_source_whose_duration_is_cycles_over_clock(campaign: Path) -> None:
    _import(campaign, FILES)
    data = _cell(campaign)
    jsonschema.validate(data, load_schema())
    (source,) = data["sources"]
    assert source["id"] == source["file"] == " + ".join(p.name for p in FILES)
    assert source["format"] == "csv-details" and source["launches"] == 6
    assert source["parts"] == [{"file": p.name, "sha256": _sha(p)} for p in FILES]
    cycles, hz, dram = _values(FILES[1]), _values(FILES[2]), _values(FILES[0])
    by_launch = {k["launch_ids"][0]: k for k in data["kernels"]}
    assert sorted(by_launch) == list(range(6)) and all(len(k["launch_ids"]) == 1 for k in data["kernels"])
    for i, k in by_launch.items():
        assert k["duration_ns"] == pytest.approx(cycles[i] / hz[i] * 1e9)  # the NERSC time recipe
        assert k["sm_hz"] == pytest.approx(hz[i]) and k["dram_bytes"] == pytest.approx(dram[i])
    assert by_launch[0]["duration_ns"] == pytest.approx(283_712.65, abs=0.01)  # 395,534.83 / 1,394,138,857.03 Hz


def test_merged_import_is_deterministic_whatever_the_order(campaign: Path) -> None:
    _import(campaign, FILES)
    first = (campaign / "cells/c1/ncu_kernels.json").read_bytes()
    _import(campaign, FILES[::-1])
    assert (campaign / "cells/c1/ncu_kernels.json").read_bytes() == first
    assert len(_cell(campaign)["sources"]) == 1


def test_a_bundle_folder_of_per_metric_files_merges_too(campaign: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "nersc-run"
    (bundle / "ncu-profiles").mkdir(parents=True)
    (bundle / "inference_perfbench_v1.json").write_text(json.dumps(
        {"schema_version": 1, "bundle_id": "nersc-run", "context": {}, "results": [], "kernel_internals": None}))
    for p in FILES:
        shutil.copy(p, bundle / "ncu-profiles")
    _import(campaign, [bundle, NERSC / "nersc_all.csv"])
    ids = sorted(s["id"] for s in _cell(campaign)["sources"])
    assert ids == [" + ".join(f"nersc-run/{p.name}" for p in FILES), "nersc_all.csv"]
    internals = json.loads((bundle / "inference_perfbench_v1.json").read_text())["kernel_internals"]
    assert len(internals["per_kernel"]) == 6 and "nersc-run/nersc_metric_dram__bytes.sum.csv +" in internals["method"]


def test_one_file_alone_is_refused_with_the_command_that_imports_the_run(campaign: Path) -> None:
    code, out = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(FILES[2]))
    assert code != 0 and "Traceback" not in out
    assert f"'{FILES[2]}': holds one metric only ({HZ}, 6 launch(es))" in out
    assert "its folder holds 3 more such file(s) of the same launches" in out and "Nothing was written." in out
    assert f"ncu --csv --metrics {','.join(METRICS)} APP > all.csv" in out
    assert not (campaign / "cells/c1/ncu_kernels.json").exists()
    # the command it prints is exact: run as given, it imports the four files as one source
    command = next(line.strip() for line in out.splitlines() if line.strip().startswith("perftunereport import_ncu"))
    args = shlex.split(command)
    assert args[args.index("--campaign") + 1] == str(campaign) and args.count("--bundle") == 4
    run_cli(*args[1:], ok=True)
    assert [s["id"] for s in _cell(campaign)["sources"]] == [" + ".join(p.name for p in FILES)]


def test_one_metric_file_without_others_beside_it_imports_with_a_note(campaign: Path, tmp_path: Path) -> None:
    alone = Path(shutil.copy(FILES[0], tmp_path))
    out = _import(campaign, [alone])
    assert "holds one metric only (dram__bytes.sum)" in out and "repeat --bundle" in out
    assert [k["dram_bytes"] for k in _cell(campaign)["kernels"]] == pytest.approx(list(_values(FILES[0]).values()))


def test_a_subset_merges_and_names_the_files_left_beside_it(campaign: Path) -> None:
    out = _import(campaign, FILES[1:3])
    assert "merged 2 per-metric files, but their folder holds 2 more of the same launches" in out
    assert "nersc_metric_dram__bytes.sum.csv" in out
    assert all(k["dram_bytes"] is None and k["duration_ns"] for k in _cell(campaign)["kernels"])


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def test_refused_when_a_file_lacks_a_launch_id(campaign: Path, tmp_path: Path) -> None:
    paths = _copies(tmp_path)
    _edit(paths[3], '"5","2612"', '"6","2612"')  # the ffma run: its last launch numbered 6
    out = _import(campaign, paths, ok=False)
    assert f"'{paths[3].name}': has no launch ID 5, which '{paths[0].name}' holds (l2_sweep_kernel)" in out
    assert "got 6 launch(es) here and 6 there (1 missing)" in out and "--launch-skip" in out
    assert not (campaign / "cells/c1/ncu_kernels.json").exists()
    with pytest.raises(InputError, match="launch ID 5"):
        _merge(paths)


def test_refused_when_one_id_names_another_kernel(campaign: Path, tmp_path: Path) -> None:
    paths = _copies(tmp_path)
    _edit(paths[2], '"l2_sweep_kernel"', '"other_kernel"')
    out = _import(campaign, paths, ok=False)
    assert (f"'{paths[2].name}': launch ID 5 has kernel name 'other_kernel' there but 'l2_sweep_kernel' in "
            f"'{paths[0].name}'") in out
    _edit(paths[2], '"other_kernel"', '"l2_sweep_kernel"')
    _edit(paths[2], '"(1056, 1, 1)"', '"(1057, 1, 1)"')
    assert "launch ID 5 has grid '(1057, 1, 1)' there but '(1056, 1, 1)'" in _import(campaign, paths, ok=False)


def test_refused_when_two_files_give_one_metric_different_values(campaign: Path, tmp_path: Path) -> None:
    paths = _copies(tmp_path)
    rerun = tmp_path / "runs" / "rerun_dram__bytes.sum.csv"
    shutil.copy(paths[0], rerun)
    _edit(rerun, '"4,204,288"', '"4,300,000"')
    out = _import(campaign, [*paths, rerun], ok=False)
    assert (f"'{rerun.name}': launch ID 2 (fma_loop_kernel): dram__bytes.sum is 4,300,000.0 byte there but "
            f"4,204,288.0 byte in '{paths[0].name}'") in out and "never averaged" in out
    _edit(rerun, '"4,300,000"', '"4,204,288"')  # the same values again: one more file of the run, merged
    _import(campaign, [*paths, rerun])
    (source,) = _cell(campaign)["sources"]
    assert len(source["parts"]) == 5


def test_the_same_file_given_twice_is_refused(campaign: Path) -> None:
    out = _import(campaign, [FILES[0], FILES[0]], ok=False)
    assert "given twice" in out and "Drop one --bundle" in out


def test_the_all_metrics_run_split_per_metric_imports_as_the_whole(campaign: Path, tmp_path: Path) -> None:
    whole = NERSC / "nersc_all.csv"
    lines = [line for line in whole.read_text().splitlines(keepends=True) if line.startswith('"')]
    header, rows = lines[0], lines[1:]
    column = next(csv.reader([header])).index("Metric Name")
    by_metric: dict[str, list[str]] = {}
    for row in rows:
        by_metric.setdefault(next(csv.reader([row]))[column], []).append(row)
    folder = tmp_path / "split"
    folder.mkdir()
    for metric, part in by_metric.items():
        (folder / f"{metric}.csv").write_text(header + "".join(part))
    assert len(by_metric) >= 10
    _import(campaign, [whole, *sorted(folder.iterdir())])
    data = _cell(campaign)
    split_id = " + ".join(sorted(f"{m}.csv" for m in by_metric))
    assert sorted(s["id"] for s in data["sources"]) == sorted(["nersc_all.csv", split_id])

    def rows_of(source: str) -> list[dict]:  # type: ignore[type-arg]
        return [{k: v for k, v in r.items() if k not in ("id", "source")} for r in data["kernels"]
                if r["source"] == source]

    assert rows_of(split_id) == rows_of("nersc_all.csv") and len(rows_of(split_id)) >= 10
    assert any(r["flops"] and r["flops"]["fp32"] for r in rows_of(split_id))


def test_a_cells_listed_per_metric_files_import_as_one_source(tmp_path: Path) -> None:
    """`captures:` listing a run's per-metric files: `demo` / import_campaign imports a cell's captures together,
    so they merge by launch ID as on the command line (one file at a time was refused as a lone part)."""
    camp = tmp_path / "camp"
    (camp / "captures").mkdir(parents=True)
    for p in FILES:
        shutil.copy(p, camp / "captures" / p.name)
    write_config(camp, hardware="h100_sm90", cells=[
        {"id": "c1", "description": "NERSC per-metric run", "captures": [f"captures/{p.name}" for p in FILES]}])
    (result,) = import_campaign(camp)
    (source,) = _cell(camp)["sources"]
    assert source["id"] == " + ".join(f"captures/{p.name}" for p in FILES) and source["launches"] == 6
    assert len(result.kernels) == 6
