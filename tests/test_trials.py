"""Trials of a cell's measurement (issue 31, commit dec7600): --trial N on the importers, a cell's `trials:`,
the warehouse views kernel_trials / cell_trials and the join's trial columns, pages 1 and 4, the kernel pages'
"over trials" row, comparison pages, grounding.trials against the data, the lake's trials table and lake compare.

Real data: campaigns/h100-decode-compile (9 torch-trace trials of eager and of compiled decode on an H100, each
cell's bundle with 9 trial results) and the example campaign's decode trace imported twice as trials 1 and 2.
Every expected number is recomputed here from the raw kernel_times.json rows and bundle results (statistics).
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import EXAMPLE, TORCH_TRACE, kernel_page_data, read_download, run_cli, write_config
from test_browser import Visit, browser  # noqa: F401  (the browser fixture)

from perfreport.config.campaign import load_campaign, trial_number
from perfreport.errors import ConfigError, InputError
from perfreport.lake.gate import check_campaign
from perfreport.lake.query import lake_query
from perfreport.site.render import RenderResult, report_render
from perfreport.timeshare import import_torch_trace
from perfreport.timeshare.store import load_schema
from perfreport.warehouse.campaign_import import import_campaign
from perfreport.warehouse.db import open_campaign
from perfreport.warehouse.gather import KERNEL_TIME, campaign_trial_samples, gather, trial_count
from perfreport.warehouse.stats import INSUFFICIENT, compare, number_text, summarize

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "campaigns" / "h100-decode-compile"
EAGER, COMPILED = "decode-b16-kv2048-eager", "decode-b16-kv2048-compiled"
DECODE, PREFILL = "decode-b16-kv2048", "prefill-b8-s1024"
DECODE_TRACE = EXAMPLE / "captures" / "decode" / "torch_trace.json.gz"
# The decode trace imported twice, under names whose order is the opposite of their trial numbers.
TRIAL_2, TRIAL_1 = "captures/decode/trials/run_a_2.json.gz", "captures/decode/trials/run_b_1.json.gz"
NSYS_CSV = ROOT / "tests" / "data" / "nsys" / "dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv"
SAMPLES_CSV = ROOT / "tests" / "data" / "samples" / "zymtrace_like_gpu_kernels.csv"
TRIAL_COLUMNS = ("metric", "before", "after", "n_before", "n_after", "ratio", "ci_low", "ci_high", "p_value",
                 "verdict")


# --- fixtures -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The H100 pair copied to tmp (not its cells/), imported and rendered by `perftunereport demo`."""
    camp = tmp_path_factory.mktemp("pair") / PAIR.name
    shutil.copytree(PAIR, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    site = tmp_path_factory.mktemp("pair-site")
    run_cli("demo", "--campaign", str(camp), "--out", str(site), ok=True)
    return camp, site / PAIR.name


@pytest.fixture(scope="module")
def pair(pair_demo: tuple[Path, Path]) -> Path:
    return pair_demo[0]


@pytest.fixture(scope="module")
def pair_site(pair_demo: tuple[Path, Path]) -> Path:
    return pair_demo[1]


@pytest.fixture(scope="module")
def two_trials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of the example campaign whose decode cell lists no unnumbered timeline; its decode trace is
    imported on the CLI twice: as --trial 2 under run_a_2.json.gz, then as --trial 1 under run_b_1.json.gz."""
    camp = tmp_path_factory.mktemp("two-trials") / EXAMPLE.name
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    _edit_config(camp, lambda doc: _cell(doc, DECODE).pop("timelines"))
    import_campaign(camp)
    (camp / "captures" / "decode" / "trials").mkdir()
    for name in (TRIAL_2, TRIAL_1):
        shutil.copy(DECODE_TRACE, camp / name)
    for trial, name in (("2", TRIAL_2), ("1", TRIAL_1)):
        run_cli("import_torch_trace", "--campaign", str(camp), "--cell-id", DECODE, "--trial", trial,
                str(camp / name), ok=True)
    return camp


@pytest.fixture(scope="module")
def two_trials_site(two_trials: Path, tmp_path_factory: pytest.TempPathFactory) -> RenderResult:
    return report_render(two_trials, tmp_path_factory.mktemp("two-trials-site"))


# --- helpers ------------------------------------------------------------------------------------------------------


def _cell(doc: dict[str, Any], cell_id: str) -> dict[str, Any]:
    return next(c for c in doc["cells"] if c["id"] == cell_id)


def _edit_config(camp: Path, edit: Any) -> None:
    path = camp / "config.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _set_trials(camp: Path, value: int) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["context"]["grounding"]["trials"] = value

    _edit_config(camp, edit)


def _times(camp: Path, cell: str) -> dict[str, Any]:
    doc = json.loads((camp / "cells" / cell / "kernel_times.json").read_text())
    jsonschema.validate(doc, load_schema("kernel_times"))
    return doc


def _name_keys(camp: Path, cell: str) -> dict[str, str]:
    """Each raw kernel name of the cell's timelines -> the warehouse's kernel key (identity only, no numbers)."""
    con = open_campaign(camp)
    try:
        return dict(con.execute("SELECT DISTINCT name, kernel FROM kernel_times WHERE cell_id = ?", [cell]).fetchall())
    finally:
        con.close()


def _raw_trials(camp: Path, cell: str) -> dict[str, dict[int, dict[str, float]]]:
    """From the raw kernel_times.json: kernel key -> trial -> summed instances, total_ns and share_pct."""
    doc, keys = _times(camp, cell), _name_keys(camp, cell)
    trial_of = {s["id"]: s.get("trial") for s in doc["sources"]}
    out: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for row in doc["kernels"]:
        trial = trial_of[row["source"]]
        if trial is not None:
            acc = out[keys[row["name"]]][trial]
            acc["instances"] += row["instances"]
            acc["total_ns"] += row["total_ns"]
            acc["share_pct"] += row["share_pct"]
    return out


def _kernel_ms_per_trial(camp: Path, cell: str) -> list[float]:
    """Each trial's summed kernel time (ms), in trial order, from the raw kernel_times.json."""
    doc = _times(camp, cell)
    per: dict[int, int] = defaultdict(int)
    trial_of = {s["id"]: s.get("trial") for s in doc["sources"]}
    for row in doc["kernels"]:
        if trial_of[row["source"]] is not None:
            per[trial_of[row["source"]]] += row["total_ns"]
    return [per[t] / 1e6 for t in sorted(per)]


def _bundle(cell: str, metric: str) -> list[float]:
    doc = json.loads((PAIR / "captures" / cell.rsplit("-", 1)[1] / "inference_perfbench_v1.json").read_text())
    return [float(r[metric]) for r in doc["results"]]


def _table(site: Path, name: str) -> dict[str, Any]:
    return json.loads(read_download(site / f"{name}.json"))


def _headline(browser: Any, page: Path, kernel_id: str) -> dict[str, str]:  # noqa: F811
    """The kernel page's "At a glance" rows (label -> text) for one kernel row, as Chromium drew them."""
    visit = Visit(browser, page)
    try:
        visit.page.evaluate(f"() => {{ location.hash = '{kernel_id}'; }}")
        visit.page.wait_for_selector("#headline-table")
        rows = dict(visit.page.evaluate("() => Array.from(document.querySelectorAll('#headline-table tr'))"
                                        ".slice(1).map(r => Array.from(r.cells).map(c => c.textContent))"))
        assert visit.errors == []
        return rows
    finally:
        visit.page.close()


# --- --trial N on the importers -----------------------------------------------------------------------------------


def test_trial_option_numbers_each_source_record(two_trials: Path) -> None:
    """--trial N lands on the file's source record (schema-valid); a file imported without --trial has no key."""
    doc = _times(two_trials, DECODE)
    assert {s["id"]: s.get("trial") for s in doc["sources"]} == {TRIAL_2: 2, TRIAL_1: 1}
    assert len({s["sha256"] for s in doc["sources"]}) == 1  # the same bytes under two names
    prefill = _times(two_trials, PREFILL)
    assert prefill["sources"] and all("trial" not in s for s in prefill["sources"])


@pytest.mark.parametrize("value", ["0", "-3", "two"])
@pytest.mark.parametrize("verb,path", [("import_torch_trace", TORCH_TRACE), ("import_nsys", NSYS_CSV),
                                       ("import_samples", SAMPLES_CSV)])
def test_trial_below_one_is_refused_by_click(campaign: Path, verb: str, path: Path, value: str) -> None:
    run = run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1", "--trial", value, str(path), ok=False)
    assert run.exit_code == 2 and isinstance(run.exception, SystemExit)
    assert "Invalid value for '--trial'" in run.output and "Traceback" not in run.output
    if value == "0":
        assert "0 is not in the range x>=1" in run.output
    assert not (campaign / "cells").exists(), "nothing may be written on a refused --trial"


@pytest.mark.parametrize("trial", [0, -1, True, 2.0])
def test_trial_below_one_is_refused_by_the_python_api(campaign: Path, trial: Any) -> None:
    with pytest.raises(InputError, match=r"--trial .*expected an integer >= 1"):
        import_torch_trace(campaign, "c1", TORCH_TRACE, trial=trial)
    assert not (campaign / "cells").exists()


def test_import_samples_trial_picks_trial_one_whatever_the_names(tmp_path: Path) -> None:
    """Two copies of one sample file, trial 2 under the name that sorts first: kernel_samples.json numbers both,
    the join takes its sample share from trial 1, and the cell counts 2 trials."""
    camp = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, camp, ignore=shutil.ignore_patterns("cells", "__pycache__"))
    import_campaign(camp)
    (camp / "captures" / "samples").mkdir()
    for trial, name in (("2", "a_samples_2.csv"), ("1", "b_samples_1.csv")):
        shutil.copy(SAMPLES_CSV, camp / "captures" / "samples" / name)
        run_cli("import_samples", "--campaign", str(camp), "--cell-id", PREFILL, "--trial", trial,
                str(camp / "captures" / "samples" / name), ok=True)
    doc = json.loads((camp / "cells" / PREFILL / "kernel_samples.json").read_text())
    jsonschema.validate(doc, load_schema("kernel_samples"))
    assert {s["id"]: s.get("trial") for s in doc["sources"]} == {
        "captures/samples/a_samples_2.csv": 2, "captures/samples/b_samples_1.csv": 1}
    con = open_campaign(camp)
    try:
        picked = con.execute("SELECT DISTINCT sample_source FROM kernel_join WHERE cell_id = ? AND "
                             "sample_source IS NOT NULL", [PREFILL]).fetchall()
    finally:
        con.close()
    assert picked == [("captures/samples/b_samples_1.csv",)]
    assert trial_count(load_campaign(camp), load_campaign(camp).cell(PREFILL)) == 2


# --- trials: in config.yaml ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path,number", [
    ("captures/eager/trials/torch_trace_t3.json.gz", 3), ("trial12.json", 12), ("run_07.nsys.sqlite", 7),
    ("t1_of_9_t4.json.gz", 4), ("h100/t5/torch_trace_t6.json.gz", 6), ("torch_trace.json.gz", None),
    ("t0.json.gz", None), ("trial7/torch_trace.json.gz", None)])
def test_trial_number_is_the_last_digits_of_the_file_name(path: str, number: int | None) -> None:
    assert trial_number(path) == number


def test_trials_are_numbered_by_name_and_sorted_by_number(tmp_path: Path) -> None:
    files = ["tr/torch_trace_t10.json.gz", "tr/torch_trace_t2.json.gz", "tr/torch_trace_t1.json.gz"]
    camp = write_config(tmp_path / "camp", cells=[{"id": "c1", "description": "x", "trials": files}])
    cell = load_campaign(camp).cell("c1")
    assert cell.trials == files
    assert cell.trial_paths(load_campaign(camp)) == [(n, (camp / f"tr/torch_trace_t{n}.json.gz").resolve())
                                                      for n in (1, 2, 10)]  # by number, not by name


def test_trials_without_a_number_or_with_one_number_twice_are_config_problems(tmp_path: Path) -> None:
    camp = write_config(tmp_path / "camp", cells=[
        {"id": "c1", "description": "x", "trials": ["tr/torch_trace_t1.json.gz", "tr/torch_trace.json.gz",
                                                     "tr/torch_trace_t01.json.gz", "tr/torch_trace_t2.json.gz"]},
        {"id": "c2", "description": "y", "trials": ["tr/t0.json"]}])
    with pytest.raises(ConfigError) as info:
        load_campaign(camp)
    assert info.value.problems == [
        "cells[0].trials: 'tr/torch_trace.json.gz' names no trial number; expected the trial's number as the last "
        "digits of the file name (torch_trace_t3.json.gz is trial 3): rename it",
        "cells[0].trials: 'tr/torch_trace_t01.json.gz' and 'tr/torch_trace_t1.json.gz' are both trial 1; each "
        "trial is one file: rename or drop one",
        "cells[1].trials: 'tr/t0.json' names no trial number; expected the trial's number as the last digits of "
        "the file name (torch_trace_t3.json.gz is trial 3): rename it",
    ]
    assert "3 problem(s)" in info.value.format_message()
    # on the CLI: one clear error naming each path, no traceback
    run = run_cli("import_torch_trace", "--campaign", str(camp), "--cell-id", "c1", str(TORCH_TRACE), ok=False)
    assert "cells[0].trials: 'tr/torch_trace.json.gz' names no trial number" in run.output
    assert "cells[1].trials" in run.output and "Traceback" not in run.output
    assert isinstance(run.exception, SystemExit) and not (camp / "cells").exists()


# --- the warehouse on the real pair -------------------------------------------------------------------------------


def test_kernel_trials_holds_nine_trials_of_every_kernel(pair: Path) -> None:
    con = open_campaign(pair)
    try:
        rows = con.execute("SELECT cell_id, kernel, trial, instances, total_ns, ns_per_launch, share_pct "
                           "FROM kernel_trials").fetchall()
        cell_trials = con.execute("SELECT cell_id, trial, kernel_ns, kernels FROM cell_trials "
                                  "ORDER BY 1, 2").fetchall()
    finally:
        con.close()
    for cell, kernels in ((EAGER, 10), (COMPILED, 8)):
        raw = _raw_trials(pair, cell)
        mine = [r for r in rows if r[0] == cell]
        assert len(raw) == kernels and len(mine) == 9 * kernels
        assert {(r[1], r[2]) for r in mine} == {(k, t) for k in raw for t in range(1, 10)}
        for _, kernel, trial, instances, total_ns, per_launch, share in mine:
            want = raw[kernel][trial]
            assert (instances, total_ns) == (want["instances"], want["total_ns"])
            assert per_launch == pytest.approx(want["total_ns"] / want["instances"])
            assert share == pytest.approx(want["share_pct"], abs=1e-9)
        per_trial = _kernel_ms_per_trial(pair, cell)
        assert [(t, ns / 1e6, n) for c, t, ns, n in cell_trials if c == cell] == [
            (t, pytest.approx(ms), kernels) for t, ms in zip(range(1, 10), per_trial, strict=True)]


def test_the_time_share_of_a_trials_only_cell_is_trial_one(pair: Path) -> None:
    """kernel_join takes one file's shares (so they add up to 100%, not 900%): trial 1's."""
    con = open_campaign(pair)
    try:
        join = con.execute("SELECT cell_id, kernel, time_share_pct, total_ms, instances, time_source_id "
                           "FROM kernel_join WHERE time_share_pct IS NOT NULL").fetchall()
    finally:
        con.close()
    for cell, folder in ((EAGER, "eager"), (COMPILED, "compiled")):
        mine = [r for r in join if r[0] == cell]
        assert {r[5] for r in mine} == {f"captures/{folder}/trials/torch_trace_t1.json.gz"}
        assert sum(r[2] for r in mine) == pytest.approx(100.0, abs=0.01)
        raw = _raw_trials(pair, cell)
        for _, kernel, share, total_ms, instances, _ in mine:
            one = raw[kernel][1]
            assert (share, total_ms * 1e6, instances) == (pytest.approx(one["share_pct"], abs=1e-9),
                                                          pytest.approx(one["total_ns"]), one["instances"])
    sdpa = next(r for r in join if r[0] == EAGER and r[1].startswith("cudnn_generated_fort_native_sdpa"))
    assert sdpa[2] == pytest.approx(46.2375)  # the eager trace t1's SDPA row


def test_time_per_launch_and_share_over_trials_match_the_raw_traces(pair: Path) -> None:
    """Every join row's trial columns are the mean and bootstrap CI of the 9 raw per-trial values; the CI holds
    the mean, and the text is `mean [low, high] (n=9)`."""
    data = gather(pair)
    checked = 0
    for cell in (EAGER, COMPILED):
        raw = _raw_trials(pair, cell)
        for r in (r for r in data.join if r["cell_id"] == cell):
            per_launch = [raw[r["kernel"]][t]["total_ns"] / raw[r["kernel"]][t]["instances"] / 1e3
                          for t in range(1, 10)]
            shares = [raw[r["kernel"]][t]["share_pct"] for t in range(1, 10)]
            for prefix, values in (("launch_us", per_launch), ("share", shares)):
                mean, lo, hi = r[f"{prefix}_mean"], r[f"{prefix}_ci_low"], r[f"{prefix}_ci_high"]
                assert r[f"{prefix}_n"] == 9
                assert mean == pytest.approx(statistics.fmean(values), rel=1e-12)
                assert min(values) <= lo < mean < hi <= max(values)
                assert r[f"{prefix}_trials"] == f"{number_text(mean)} [{number_text(lo)}, {number_text(hi)}] (n=9)"
            checked += 1
    assert checked == 18
    sdpa = next(r for r in data.join if r["cell_id"] == EAGER and r["label"].startswith("cudnn_generated"))
    assert sdpa["launch_us_trials"] == "178 [177.9, 178.2] (n=9)"
    assert sdpa["share_trials"] == "46.19 [46.13, 46.25] (n=9)"


def test_a_split_key_carries_its_whole_keys_trials_and_an_unsplit_one_its_own(two_trials: Path) -> None:
    """The example's decode cell splits two keys into parts (by op and shapes, by ncu time): trials time the whole
    key, so each part carries the key's summary and says so; every other timed row carries n = 2 of two identical
    trials (CI = the point)."""
    data = gather(two_trials)
    rows = [r for r in data.join if r["cell_id"] == DECODE]
    parts = [r for r in rows if r["part"] is not None]
    whole = [r for r in rows if r["part"] is None and r["time_share_pct"] is not None]
    assert len(parts) == 4 and len(whole) == 7
    for r in parts:
        siblings = [q for q in parts if q["kernel"] == r["kernel"]]
        assert r["launch_us_n"] == 2 and r["launch_us_trials"].endswith(f"(n=2) for the whole key (all "
                                                                         f"{len(siblings)} parts)")
        assert len({q["launch_us_mean"] for q in siblings}) == 1  # one key, one summary
    raw = _raw_trials(two_trials, DECODE)
    for r in whole:
        one = raw[r["kernel"]][1]
        assert raw[r["kernel"]][2] == one  # the same file twice
        per_launch = one["total_ns"] / one["instances"] / 1e3
        assert (r["launch_us_n"], r["launch_us_mean"], r["launch_us_ci_low"], r["launch_us_ci_high"]) == (
            2, pytest.approx(per_launch), pytest.approx(per_launch), pytest.approx(per_launch))
        assert r["launch_us_trials"] == f"{number_text(r['launch_us_mean'])} [{number_text(r['launch_us_ci_low'])}, " \
                                        f"{number_text(r['launch_us_ci_high'])}] (n=2)"
    assert all(r["launch_us_trials"] is None for r in data.join if r["cell_id"] != DECODE)


def test_the_cli_trials_give_two_trials_and_time_shares_from_trial_one(two_trials: Path, tmp_path: Path) -> None:
    """kernel_trials: 2 trials x every kernel key of the trace; kernel_join's file: trial 1 (named run_b_1, after
    run_a_2), and once an unnumbered timeline is imported, that one."""
    con = open_campaign(two_trials)
    try:
        counts = con.execute("SELECT cell_id, count(*), count(DISTINCT trial), count(DISTINCT kernel) "
                             "FROM kernel_trials GROUP BY 1").fetchall()
        picked = con.execute("SELECT DISTINCT time_source_id FROM kernel_join WHERE cell_id = ? AND "
                             "time_source_id IS NOT NULL", [DECODE]).fetchall()
    finally:
        con.close()
    kernels = len(_raw_trials(two_trials, DECODE))
    assert kernels == 9 and counts == [(DECODE, 2 * kernels, 2, kernels)]
    assert picked == [(TRIAL_1,)]
    camp = tmp_path / "c"
    shutil.copytree(two_trials, camp)
    run_cli("import_torch_trace", "--campaign", str(camp), "--cell-id", DECODE,
            str(camp / "captures" / "decode" / "torch_trace.json.gz"), ok=True)
    con = open_campaign(camp)
    try:
        picked = con.execute("SELECT DISTINCT time_source_id FROM kernel_join WHERE cell_id = ? AND "
                             "time_source_id IS NOT NULL", [DECODE]).fetchall()
        trials = con.execute("SELECT count(*), count(DISTINCT trial) FROM kernel_trials").fetchone()
    finally:
        con.close()
    assert picked == [("captures/decode/torch_trace.json.gz",)]  # an unnumbered file before the trials
    assert trials == (2 * kernels, 2)  # the unnumbered file is no trial


def test_campaign_trial_samples_of_the_pair(pair: Path) -> None:
    samples = campaign_trial_samples(load_campaign(pair))
    assert sorted(samples) == [COMPILED, EAGER]
    for cell, kernels in ((EAGER, 10), (COMPILED, 8)):
        s = samples[cell]
        launch = [m for m in s if m.endswith(" time per launch (µs)")]
        assert len(launch) == kernels and len(s) == kernels + 3
        assert s[KERNEL_TIME] == pytest.approx(_kernel_ms_per_trial(pair, cell))
        assert s["layer_tpot_ms"] == _bundle(cell, "layer_tpot_ms")
        assert s["throughput_tok_s"] == _bundle(cell, "throughput_tok_s")
        assert all(len(v) == 9 for v in s.values())
    cfg = load_campaign(pair)
    assert [trial_count(cfg, c) for c in cfg.cells] == [9, 9]
    example = load_campaign(EXAMPLE)
    assert campaign_trial_samples(example) == {}


# --- the site -----------------------------------------------------------------------------------------------------


def test_page_one_lists_each_cells_trials(pair_site: Path) -> None:
    html = (pair_site / "01-summary.html").read_text()
    assert '<h2 id="trials">Trials</h2>' in html and 'id="table-trials"' in html
    assert "One measurement per cell: no trials." not in html
    rows = {(r["cell_id"], r["metric"]): r for r in _table(pair_site, "01-summary.trials")["rows"]}
    assert sorted(rows) == sorted((c, m) for c in (EAGER, COMPILED)
                                  for m in (KERNEL_TIME, "layer_tpot_ms", "throughput_tok_s"))
    for cell in (EAGER, COMPILED):
        for metric in ("layer_tpot_ms", "throughput_tok_s"):
            values, r = _bundle(cell, metric), rows[(cell, metric)]
            assert (r["n"], r["mean"], r["median"], r["min"], r["std"]) == (
                9, pytest.approx(statistics.fmean(values)), pytest.approx(statistics.median(values)),
                pytest.approx(min(values)), pytest.approx(statistics.stdev(values)))
            low, high = (float(x.replace(",", "")) for x in r["ci"].strip("[]").split(", "))
            assert low <= r["mean"] <= high
    assert rows[(EAGER, "throughput_tok_s")]["ci"] == "[38,071, 38,381]"  # number_text: no exponent, thousands


def test_page_one_kernel_time_per_trial_is_the_raw_sum(pair: Path, pair_site: Path) -> None:
    rows = {(r["cell_id"], r["metric"]): r for r in _table(pair_site, "01-summary.trials")["rows"]}
    for cell in (EAGER, COMPILED):
        values = _kernel_ms_per_trial(pair, cell)
        r = rows[(cell, KERNEL_TIME)]
        assert (r["n"], r["mean"], r["median"], r["min"], r["std"]) == (
            9, pytest.approx(statistics.fmean(values)), pytest.approx(statistics.median(values)),
            pytest.approx(min(values)), pytest.approx(statistics.stdev(values)))
    assert rows[(EAGER, KERNEL_TIME)]["mean"] > rows[(COMPILED, KERNEL_TIME)]["mean"]  # the fusion saved kernel time


def test_page_four_has_the_trial_columns_only_with_trials(pair_site: Path, example_site: RenderResult) -> None:
    labels = ["time share over trials (%)", "time per launch over trials (µs)"]
    pair_join = _table(pair_site, "04-time-share.join")
    columns = [c["label"] for c in pair_join["columns"]]
    at = columns.index("time share")
    assert columns[at + 1:at + 3] == labels
    html = (pair_site / "04-time-share.html").read_text()
    assert all(f"<th>{label}</th>" in html for label in labels)
    assert all(r["share_trials"] and r["launch_us_trials"] for r in pair_join["rows"])
    example_join = _table(example_site.campaign_site, "04-time-share.join")
    assert not set(labels) & {c["label"] for c in example_join["columns"]}
    assert "over trials" not in (example_site.campaign_site / "04-time-share.html").read_text()
    summary = (example_site.campaign_site / "01-summary.html").read_text()
    assert "One measurement per cell: no trials." in summary and 'id="table-trials"' not in summary
    assert not (example_site.campaign_site / "01-summary.trials.json").exists()


def test_the_comparison_page_compares_every_repeated_number(pair: Path, pair_site: Path) -> None:
    """Config order: eager is the first cell (before), compiled after; every metric both cells repeated, the
    kernel time by the raw per-trial sums (compiled ran less kernel time: faster) and the kernels by label."""
    rows = {r["metric"]: r for r in _table(pair_site, "compare-stack.engine-1.trials")["rows"]}
    samples = campaign_trial_samples(load_campaign(pair))
    shared = sorted(set(samples[EAGER]) & set(samples[COMPILED]))
    assert sorted(rows) == shared and len(shared) == 7
    assert {(r["before"], r["after"], r["n_before"], r["n_after"]) for r in rows.values()} == {(EAGER, COMPILED, 9, 9)}
    eager, compiled = _kernel_ms_per_trial(pair, EAGER), _kernel_ms_per_trial(pair, COMPILED)
    kt = rows[KERNEL_TIME]
    assert kt["ratio"] == pytest.approx(statistics.median(compiled) / statistics.median(eager))
    assert kt["verdict"] == "faster" and kt["p_value"] < 0.001
    c = compare(eager, compiled)
    assert kt["ci"] == f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
    split = rows["splitKreduce_kernel time per launch (µs)"]
    assert split["verdict"] == "slower" and split["ratio"] > 1.05
    assert rows["nvjet_sm90_tst_192x16_64x8_4x1_v_bz_NNT time per launch (µs)"]["verdict"] == "no significant change"


def test_the_kernel_page_shows_the_kernel_over_trials(browser: Any, pair_site: Path,  # noqa: F811
                                                      example_site: RenderResult) -> None:
    join = _table(pair_site, "04-time-share.join")["rows"]
    data = kernel_page_data(pair_site / f"kernel-{EAGER}.html")
    sdpa = next(r for r in data["join"] if r["label"].startswith("cudnn_generated_fort_native_sdpa"))
    assert sdpa["launch_us_trials"] == next(r["launch_us_trials"] for r in join
                                            if r["cell_id"] == EAGER and r["label"] == sdpa["label"])
    rows = _headline(browser, pair_site / f"kernel-{EAGER}.html", sdpa["kernel_id"])
    assert rows["over trials"] == (f"time per launch {sdpa['launch_us_trials']} µs; time share "
                                   f"{sdpa['share_trials']} % (mean [95% CI] over the cell's timeline trials)")
    assert rows["over trials"].startswith("time per launch 178 [177.9, 178.2] (n=9) µs; time share 46.19 [")
    site = example_site.campaign_site
    example = kernel_page_data(site / f"kernel-{DECODE}.html")
    kernel_id = next(r["kernel_id"] for r in example["join"] if r["label"].startswith("cudnn_generated"))
    rows = _headline(browser, site / f"kernel-{DECODE}.html", kernel_id)
    assert rows["over trials"].startswith("one measurement: no timeline trials")


def test_a_split_kernel_with_trials_is_not_called_one_measurement(browser: Any,  # noqa: F811
                                                                  two_trials_site: RenderResult) -> None:
    """The decode cell holds 2 timeline trials of every kernel, its splitKreduce key included; that kernel's join
    rows are parts (split by ncu time), which carry no trial columns, so the page must not say the cell has no
    timeline trials."""
    page = two_trials_site.campaign_site / f"kernel-{DECODE}.html"
    data = kernel_page_data(page)
    split = next(r for r in data["join"] if r["label"].startswith("splitKreduce_kernel") and r["part"] == 1)
    whole = next(r for r in data["join"] if r["label"].startswith("cudnn_generated"))
    assert _headline(browser, page, whole["kernel_id"])["over trials"].startswith("time per launch ")
    said = _headline(browser, page, split["kernel_id"])["over trials"]
    assert "no timeline trials" not in said, said


# --- grounding.trials, the lake -----------------------------------------------------------------------------------


def test_grounding_trials_is_checked_against_the_timeline_trials(two_trials: Path, tmp_path: Path) -> None:
    """2 timeline trials (no bundle) typed as 5: a gate problem of the decode cell only; --strict refuses and
    writes no lake; typed as 2 it publishes, with each repeated number of decode in the lake's trials table."""
    camp = tmp_path / "c"
    shutil.copytree(two_trials, camp)
    cfg = load_campaign(camp)
    assert {c.id: trial_count(cfg, c) for c in cfg.cells} == {PREFILL: None, DECODE: 2,
                                                               "prefill-b8-s1024-attach": None}
    _set_trials(camp, 5)
    problems = {c.cell_id: c.context_problems for c in check_campaign(load_campaign(camp))}
    assert problems[PREFILL] == [] and problems["prefill-b8-s1024-attach"] == []
    [problem] = problems[DECODE]
    assert problem.startswith(f"cells[{DECODE}].context.grounding.trials: 5 typed, but ")
    assert " 2 trial(s) " in problem and problem.endswith("; write 2")
    lake = tmp_path / "lake"
    run = run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--strict", ok=False)
    assert "context.grounding.trials: 5 typed" in run.output and "write 2" in run.output
    assert DECODE in run.output and "Traceback" not in run.output and "Nothing was written" in run.output
    assert not (lake / "catalog.db").exists()
    _set_trials(camp, 2)
    assert all(c.context_problems == [] for c in check_campaign(load_campaign(camp)))
    run_cli("publish_to_lake", "--campaign", str(camp), "--lake", str(lake), "--strict", ok=True)
    rows = lake_query(lake, "SELECT cell_id, metric, n, \"values\" FROM trials ORDER BY 1, 2").rows
    assert {r[0] for r in rows} == {DECODE}
    kernel_time = sum(r["total_ns"] for r in _times(camp, DECODE)["kernels"] if r["source"] == TRIAL_1) / 1e6
    by_metric = {r[1]: r for r in rows}
    assert by_metric[KERNEL_TIME][2:] == (2, [pytest.approx(kernel_time)] * 2)
    launch = [r for r in rows if r[1].endswith(" time per launch (µs)")]
    assert len(launch) == 9 and all(r[2] == 2 and r[3][0] == r[3][1] for r in launch)


def test_the_grounding_problem_does_not_blame_bundles_the_cell_lacks(two_trials: Path, tmp_path: Path) -> None:
    """The decode cell has no bundle: its 2 trials are timelines (--trial N). The problem must not say "the cell's
    bundles hold 2 trial(s) (distinct `trial` numbers of their results)", which sends the reader to files that
    do not exist."""
    camp = tmp_path / "c"
    shutil.copytree(two_trials, camp)
    _set_trials(camp, 5)
    [problem] = next(c.context_problems for c in check_campaign(load_campaign(camp)) if c.cell_id == DECODE)
    assert "bundles" not in problem and "of their results" not in problem, problem


def test_lake_compare_tests_the_pairs_trials(pair: Path, tmp_path: Path) -> None:
    """The pair publishes under --strict (grounding.trials 9 = 9 trials held); lake compare sorts a group by the
    varied value: 'pytorch-compile (inductor, default mode)' < 'pytorch-eager', so compiled is the first cell
    (before) and eager the one compared with it (after). Eager's layer is faster (ratio of medians eager / compiled
    = 1 / 1.078), its throughput higher (faster, ratio > 1: higher is better), its kernel time larger (slower)."""
    lake = tmp_path / "lake"
    run_cli("publish_to_lake", "--campaign", str(pair), "--lake", str(lake), "--strict", ok=True)
    stored = lake_query(lake, "SELECT cell_id, metric, n, \"values\" FROM trials ORDER BY 1, 2").rows
    assert [r[0] for r in stored].count(EAGER) == 13 and [r[0] for r in stored].count(COMPILED) == 11
    assert all(r[2] == len(r[3]) == 9 for r in stored)
    assert next(r[3] for r in stored if r[:2] == (EAGER, "layer_tpot_ms")) == _bundle(EAGER, "layer_tpot_ms")
    out = run_cli("lake", "compare", "--lake", str(lake), "--metric", "duration_ns", "--vary", "stack.engine",
                  "--format", "json", ok=True).stdout
    [group] = json.loads(out)["groups"]
    assert [c["cell_id"] for c in group["cells"]] == [COMPILED, EAGER]
    rows = {r["metric"]: r for r in group["trials"]}
    assert all(set(r) == set(TRIAL_COLUMNS) for r in group["trials"])
    assert {(r["before"], r["after"], r["n_before"], r["n_after"]) for r in rows.values()} == {
        (f"{PAIR.name}/{COMPILED}", f"{PAIR.name}/{EAGER}", 9, 9)}
    assert len(rows) == 7
    tpot = rows["layer_tpot_ms"]
    eager_tpot, compiled_tpot = _bundle(EAGER, "layer_tpot_ms"), _bundle(COMPILED, "layer_tpot_ms")
    assert tpot["ratio"] == pytest.approx(statistics.median(eager_tpot) / statistics.median(compiled_tpot))
    assert 0.90 < tpot["ratio"] < 0.95 and tpot["ci_high"] < 1.0 and tpot["p_value"] < 0.001
    assert tpot["verdict"] == "faster"
    throughput = rows["throughput_tok_s"]
    assert throughput["ratio"] > 1.05 and throughput["verdict"] == "faster"
    kt = rows[KERNEL_TIME]
    assert kt["ratio"] == pytest.approx(statistics.median(_kernel_ms_per_trial(pair, EAGER))
                                        / statistics.median(_kernel_ms_per_trial(pair, COMPILED)))
    assert kt["verdict"] == "slower"
    table = run_cli("lake", "compare", "--lake", str(lake), "--metric", "duration_ns", "--vary", "stack.engine",
                    ok=True).stdout
    assert f"trials by stack.engine: each cell against {PAIR.name}/{COMPILED}" in table


# --- stats: the text pages print ----------------------------------------------------------------------------------


def test_summary_text_and_number_text() -> None:
    s = summarize([177.9, 178.0, 178.1, 177.8, 178.2])
    assert s is not None and s.ci_low is not None and s.ci_high is not None
    assert s.text() == f"{number_text(s.mean)} [{number_text(s.ci_low)}, {number_text(s.ci_high)}] (n=5)"
    assert number_text(35598.49) == "35,598" and number_text(1234.5) == "1234" and number_text(1.848002) == "1.848"
    assert number_text(2.5e15) == "2.5e+15" and number_text(-45000.4) == "-45,000"
    const = summarize([3.0, 3.0])
    assert const is not None and (const.ci_low, const.ci_high, const.std) == (3.0, 3.0, 0.0)
    assert const.text() == "3 [3, 3] (n=2)"
    assert compare([1.0, 1.0], [2.0, 2.0]).verdict == INSUFFICIENT


@pytest.mark.parametrize("value", [9999.6, 9999.99, -9999.7])
def test_number_text_writes_no_exponent_just_below_ten_thousand(value: float) -> None:
    """number_text promises no exponent for the sizes a throughput or a time in ns reaches; 9999.6 (a time in ns,
    a throughput in tok/s) rounds to 4 significant digits as 1e+04."""
    text = number_text(value)
    assert "e" not in text, text
    assert float(text.replace(",", "")) == pytest.approx(value, rel=1e-3)
