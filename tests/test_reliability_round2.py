"""Issue 29, the second attack round: each serious and minor bug found, held on a real fixture where one exists.

Each refusal is one `Error:` line (exit non-zero, no traceback) naming the file and what is wrong; what was written
before is byte-identical after."""

from __future__ import annotations

import csv
import gzip
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

DATA = Path(__file__).parent / "data"
RAW_MS = DATA / "h200_capture" / "run1" / "bundle" / "ncu-profiles" / "gemm_bf16_full-raw.csv"
TRACE = DATA / "torch" / "decode_steps_torch_trace.json.gz"
NSYS_CSV = DATA / "nsys" / "dotllm_rtx4090_nsys2024.6.2_cuda_gpu_kern_sum.csv"


def _cell(campaign: Path, name: str) -> Path:
    return campaign / "cells" / "c1" / name


def _error_line(out: str) -> str:
    assert "Traceback" not in out, out
    (line,) = [x for x in out.splitlines() if x.startswith("Error:")]
    return line


def _nsys_with(tmp_path: Path, value: str, name: str = "kern_cuda_gpu_kern_sum.csv") -> Path:
    """The real RTX 4090 kernel summary with the first kernel's Total Time (ns) written as `value` (quoted)."""
    lines = NSYS_CSV.read_text().split("\n")
    fields = lines[1].split(",")
    fields[1] = f'"{value}"'
    lines[1] = ",".join(fields)
    out = tmp_path / name
    out.write_text("\n".join(lines))
    return out


# 1. a decimal comma is refused, never read with its comma deleted (x10 the time); thousands separators still read
def test_nsys_decimal_comma_is_refused_naming_the_cause(campaign: Path, tmp_path: Path) -> None:
    run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(NSYS_CSV), ok=True)
    before = _cell(campaign, "kernel_times.json").read_bytes()
    bad = _nsys_with(tmp_path, "1707204307,5")
    line = _error_line(run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(bad),
                               ok=False).output)
    assert f"{bad.name}:2" in line and "'Total Time (ns)'" in line and "1707204307,5" in line
    assert "decimal comma" in line and "LC_ALL=C" in line
    assert _cell(campaign, "kernel_times.json").read_bytes() == before


def test_nsys_thousands_separators_read_as_the_number(campaign: Path, tmp_path: Path) -> None:
    grouped = _nsys_with(tmp_path, "1,707,204,307")
    run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(grouped), ok=True)
    rows = json.loads(_cell(campaign, "kernel_times.json").read_text())
    first = next(k for k in rows["kernels"] if k["name"] == "flash_attention_prefill_f16")
    assert first["total_ns"] == 1_707_204_307


# 2. a step is never busier than its wall time; GPU work that outruns its step counts where it runs, and is said
def _outrun_trace(tmp_path: Path) -> Path:
    """Six 1 ms ProfilerStep windows, each launching a 10 ms kernel: the GPU queue runs them back to back."""
    events = []
    for i in range(6):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": i * 1000, "dur": 1000,
                       "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": i * 1000 + 5, "dur": 5,
                       "pid": 1, "tid": 1})
        events.append({"ph": "X", "cat": "kernel", "name": "long_kernel", "ts": 10 + i * 10_000, "dur": 10_000,
                       "pid": 0, "tid": 7})
    path = tmp_path / "outrun_trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_step_busy_is_clipped_to_its_window_and_spill_is_reported(tmp_path: Path) -> None:
    from perfreport.timeshare.step_budget import step_budget

    budget = step_budget(_outrun_trace(tmp_path))
    assert [s["step"] for s in budget.steps] == [f"ProfilerStep#{i}" for i in range(6)]
    assert all(s["gpu_busy_ms"] <= s["wall_ms"] + 1e-12 for s in budget.steps)
    assert budget.steps[0]["gpu_busy_ms"] == pytest.approx(0.990) and budget.steps[0]["gpu_carried_in_ms"] == 0
    for s in budget.steps[1:]:  # the first kernel still runs: busy the whole millisecond, carried in
        assert s["gpu_busy_ms"] == pytest.approx(1.0) and s["gpu_carried_in_ms"] == pytest.approx(1.0)
        assert s["host_gap_ms"] == pytest.approx(0.0)
    (warning,) = [w for w in budget.warnings if "outruns" in w]
    assert "5 step(s) (ProfilerStep#1, ProfilerStep#2" in warning
    assert "54.010 ms of GPU work runs past the last step window" in warning
    assert budget.host_share_pct == pytest.approx(100 * 0.010 / 6.0)


# 3. a render killed between its two swap renames: the next render puts the old tree back, the user's files kept
_KILL_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
from perfreport.site.render import report_render

site, folder = Path(sys.argv[2]).resolve(), Path(sys.argv[2]).resolve() / sys.argv[3]
real = Path.rename
def rename(self, target):
    if Path(target).resolve() == folder and ".render-" in str(self):  # the new tree moving in: die first
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, target)
Path.rename = rename
report_render(Path(sys.argv[1]), site)
"""


def test_a_render_killed_between_the_swap_renames_loses_nothing(example_campaign: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from perfreport.site.render import report_render

    site = tmp_path / "site"
    result = report_render(example_campaign, site)
    mine = result.campaign_site / "notes.md"
    mine.write_text("my own notes, kept by every render\n")
    old_summary = (result.campaign_site / "01-summary.html").read_bytes()
    script = tmp_path / "kill_render.py"
    script.write_text(_KILL_BETWEEN_RENAMES)
    proc = subprocess.run([sys.executable, str(script), str(example_campaign), str(site), result.campaign_site.name],
                          capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert not result.campaign_site.exists()  # the kill point: the old tree set aside, the new one not yet in
    (stale,) = site.glob(".render-*")
    assert (stale / ".attic" / "journal.json").is_file()
    again = report_render(example_campaign, site)  # recovers the set-aside tree, then swaps the new one in
    assert mine.read_text() == "my own notes, kept by every render\n"
    assert (again.campaign_site / "01-summary.html").read_bytes() == old_summary  # same data, same page
    assert not list(site.glob(".render-*"))


# 4. cells/<id> (or cells/) linked out of the campaign: refused, nothing written there; site/<campaign> as a link too
H100_REP = DATA / "h100_oracle" / "oracle_full.ncu-rep.gz"


@pytest.mark.parametrize("linked", ["cells/c1", "cells"])
def test_a_cell_folder_linked_outside_is_refused(tmp_path: Path, linked: str) -> None:
    from conftest import write_config

    camp = write_config(tmp_path / "camp", hardware="h100_sm90")
    outside = tmp_path / "outside"
    outside.mkdir()
    (camp / linked).parent.mkdir(parents=True, exist_ok=True)
    (camp / linked).symlink_to(outside, target_is_directory=True)
    out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(H100_REP),
                  ok=False).output
    line = _error_line(out)
    assert f"'{camp / linked}' is a link to '{outside.resolve()}', outside the campaign folder" in line
    assert list(outside.iterdir()) == []
    out = run_cli("import_nsys", "--campaign", str(camp), "--cell-id", "c1", str(NSYS_CSV), ok=False).output
    assert "outside the campaign folder" in _error_line(out) and list(outside.iterdir()) == []


def test_a_campaign_site_folder_that_is_a_link_is_refused(example_campaign: Path, tmp_path: Path) -> None:
    import yaml

    cid = yaml.safe_load((example_campaign / "config.yaml").read_text())["campaign"]
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    site.mkdir()
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not a site\n")
    (site / cid).symlink_to(elsewhere, target_is_directory=True)
    out = run_cli("report_render", "--campaign", str(example_campaign), "--out", str(site), ok=False).output
    line = _error_line(out)
    assert f"'{site / cid}' is a link (to '{elsewhere}')" in line and "must be a real folder" in line
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious.txt"] and (site / cid).is_symlink()


# 5. invisible characters are not a filled field; look-alike placeholders are placeholders
@pytest.mark.parametrize("value", ["\u200b", "\ufeff", "\u00ad", "\u3164", "\u2800", " \u200b\u2060 ", "\u034f"])
def test_invisible_characters_are_no_value(value: str) -> None:
    from perfreport.config.context import context_value_problem, nonempty_text

    assert context_value_problem("image", value) == f"{value!r} shows nothing (invisible characters only)"
    assert nonempty_text(value) == "non-empty string"


@pytest.mark.parametrize("value", ["ＴＢＤ", "TBD.", "\u2014", "\u2013", "todo!", "...", "Ｎ／Ａ"])
def test_look_alike_placeholders_are_placeholders(value: str) -> None:
    from perfreport.config.context import context_value_problem

    why = context_value_problem("image", value, "stack")
    assert why is not None and ("placeholder" in why or "not applicable" in why), (value, why)
    assert context_value_problem("image", "vllm/vllm-openai:v0.11.0", "stack") is None  # a real value passes


def test_an_invisible_model_name_is_refused_when_the_campaign_loads(tmp_path: Path) -> None:
    from conftest import write_config

    camp = write_config(tmp_path / "camp", context={"identity": {"model": "\u200b\u2800"}})
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert "context.identity.model" in out and "non-empty string" in out and "Traceback" not in out


# 6. a publish from a host whose clock is 8 days ahead expires nothing the lake's own record holds as young
def test_a_publish_from_a_clock_days_ahead_expires_no_young_snapshot(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from datetime import UTC, datetime, timedelta

    from test_lake import make_campaign

    from perfreport.lake import writer
    from perfreport.lake.iceberg import load_tables, open_catalog, resolve_lake
    from perfreport.lake.writer import publish_to_lake

    camp = make_campaign(tmp_path / "camp")
    lake = tmp_path / "lake"
    config = camp / "config.yaml"

    def publish_changed(cache: str) -> None:  # each publish changes a value: an identical one writes nothing
        config.write_text(config.read_text().replace("cache: warm", f"cache: {cache}").replace(
            "cache: cold", f"cache: {cache}"))
        publish_to_lake(camp, lake)

    publish_changed("warm")
    publish_changed("cold")

    def snapshots() -> dict[str, list[int]]:
        tables = load_tables(open_catalog(resolve_lake(lake)), ("kernels", "publications"))
        return {n: sorted(s.snapshot_id for s in t.snapshots()) for n, t in tables.items()}

    before = snapshots()
    ahead = timedelta(days=8)
    real_time, real_datetime = time.time, datetime

    class Ahead(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return real_datetime.now(tz or UTC) + ahead

    monkeypatch.setattr(time, "time", lambda: real_time() + ahead.total_seconds())  # pyiceberg's snapshot clock
    monkeypatch.setattr(writer, "datetime", Ahead)  # the publication's timestamp
    publish_changed("warm")
    after = snapshots()
    for name, ids in before.items():
        assert set(ids) <= set(after[name]), f"{name}: snapshots the lake holds as young were expired"
        assert len(after[name]) > len(ids)


# 7. captures/timelines/samples leading out of the campaign are refused; a non-export file is never echoed
@pytest.mark.parametrize("key", ["captures", "timelines", "samples"])
def test_a_path_out_of_the_campaign_is_refused_and_never_read(tmp_path: Path, key: str) -> None:
    from conftest import write_config

    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-the-password\n")
    camp = write_config(tmp_path / "camp", cells=[{"id": "c1", "description": "x", key: ["../secret.txt"]}])
    out = run_cli("campaign", "validate", str(camp), ok=False).output
    assert f"cells[0].{key}[0]: '../secret.txt' leads outside the campaign folder" in out
    out = run_cli("demo", "--campaign", str(camp), "--out", str(tmp_path / "site"), ok=False).output
    assert "hunter2" not in out and "leads outside the campaign folder" in out and "Traceback" not in out


def test_a_file_that_is_no_export_is_not_echoed(tmp_path: Path) -> None:
    from conftest import write_config

    camp = write_config(tmp_path / "camp", cells=[{"id": "c1", "description": "x", "captures": ["notes.csv"],
                                                   "timelines": ["more.csv"]}])
    (camp / "notes.csv").write_text("hunter2-the-password\n")
    (camp / "more.csv").write_text("hunter3-the-password\n")
    out = run_cli("demo", "--campaign", str(camp), "--out", str(tmp_path / "site"), ok=False).output
    assert "hunter2" not in out and "no ncu CSV header found" in out and "line 1 (20 characters)" in out
    (camp / "notes.csv").unlink()
    camp2 = write_config(tmp_path / "camp2", cells=[{"id": "c1", "description": "x", "timelines": ["more.csv"]}])
    (camp2 / "more.csv").write_text("hunter3-the-password\n")
    out = run_cli("demo", "--campaign", str(camp2), "--out", str(tmp_path / "site"), ok=False).output
    assert "hunter3" not in out and "not an nsys kernel summary" in out


# 12. an input that is not a regular file (/dev/zero behind a .csv link, a FIFO) is refused in one line
@pytest.mark.parametrize("verb", ["import_ncu", "import_nsys"])
def test_a_non_regular_input_is_refused(campaign: Path, tmp_path: Path, verb: str) -> None:
    import os

    link = tmp_path / "zero.csv"
    link.symlink_to("/dev/zero")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for path, kind in ((link, "a device"), (fifo, "a FIFO")):
        args = ["--bundle", str(path)] if verb == "import_ncu" else [str(path)]
        out = run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1", *args, ok=False).output
        line = _error_line(out)
        assert f"'{path}'" in line and f"{kind}, not a regular file" in line, line
    assert "/dev/zero" in _error_line(run_cli(verb, "--campaign", str(campaign), "--cell-id", "c1",
                                              *(["--bundle", str(link)] if verb == "import_ncu" else [str(link)]),
                                              ok=False).output)


# 11. escape sequences in data (an OSC 52 clipboard write) never reach the terminal raw
OSC52 = "\x1b]52;c;aGFja2Vk\x07"


def test_value_view_and_import_progress_print_control_characters_escaped(example_campaign: Path,
                                                                         tmp_path: Path) -> None:
    import shutil

    camp = tmp_path / "camp"
    shutil.copytree(example_campaign, camp)
    for path in (camp / "cells").glob("*/ncu_kernels.json"):
        data = json.loads(path.read_text())
        for k in data["kernels"]:
            k["label"] = f"evil{OSC52}" + k["label"].removeprefix(k["function"])
            k["name"] = k["function"] = f"evil{OSC52}"
        path.write_text(json.dumps(data))
    out = run_cli("value_view", "--campaign", str(camp), ok=True).output
    assert "\x1b" not in out and "\x07" not in out and "evil\\x1b]52;c;aGFja2Vk\\x07" in out
    raw = next((camp / "captures").glob("*raw*.csv"), None) or next(DATA.glob("h200_oracle/oracle_full-raw.csv"))
    evil_file = tmp_path / f"cap{OSC52}-raw.csv"
    shutil.copy(raw, evil_file)
    out = run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "decode-b16-kv2048", "--bundle",
                  str(evil_file), "--hardware-mismatch", "warn", ok=None).output
    assert "\x1b" not in out and "\x07" not in out and "cap\\x1b]52" in out


# 8. a key given twice in config.yaml, a column given twice in a samples CSV: refused, never the last one silently
def test_a_duplicated_config_key_is_refused_with_both_lines(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / "config.yaml").write_text("schema_version: 1\ncampaign: camp\nhardware: h200_sm90\nhardware: h100_sm90\n"
                                      "sol_rigor: L2\ncells: []\n")
    line = [x for x in run_cli("campaign", "validate", str(camp), ok=False).output.splitlines() if "duplicate key" in x]
    assert line == ["  - line 4, column 1: duplicate key 'hardware' (first given at line 3); each key once: keep one"]


def test_a_duplicated_samples_column_is_refused(campaign: Path, tmp_path: Path) -> None:
    src = DATA / "samples" / "zymtrace_like_gpu_kernels.csv"
    lines = src.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if not x.startswith("#"))
    lines[at] = lines[at] + ",samples"
    lines[at + 1:] = [x + ",1" if x and not x.startswith("#") else x for x in lines[at + 1:]]
    bad = tmp_path / "dup_samples.csv"
    bad.write_text("\n".join(lines) + "\n")
    line = _error_line(run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(bad),
                               ok=False).output)
    assert "column(s) 'samples' given twice in the header" in line and bad.name in line


# 13. the raw and the details CSV of one full capture in one cell: the source with FLOP counters supplies the join
def test_the_source_with_flop_counters_supplies_the_join(tmp_path: Path) -> None:
    from conftest import write_config

    raw, details = DATA / "h200_oracle" / "oracle_full-raw.csv", DATA / "h200_oracle" / "oracle_full-details.csv"
    camp = write_config(tmp_path / "camp")
    for path in (details, raw):  # the details page's id sorts first: it won the tie before
        run_cli("import_ncu", "--campaign", str(camp), "--cell-id", "c1", "--bundle", str(path), ok=True)
    out = run_cli("query", "--campaign", str(camp), "--format", "json",
                  "select ncu_source, count(*) AS n, count(ncu_flops) AS with_flops, count(arithmetic_intensity)"
                  " AS with_ai from kernel_join group by ncu_source", ok=True).stdout
    rows = json.loads(out)
    assert [r["ncu_source"] for r in rows] == [raw.name]
    assert rows[0]["with_flops"] == rows[0]["n"] > 0 and rows[0]["with_ai"] > 0


# 10. nsys rows with a fractional launch count or Min > Max; samples share_pct as fractions of 1: refused by name
def _nsys_field(tmp_path: Path, index: int, value: str) -> Path:
    lines = NSYS_CSV.read_text().split("\n")
    fields = lines[1].split(",")
    fields[index] = value
    lines[1] = ",".join(fields)
    out = tmp_path / "edited_cuda_gpu_kern_sum.csv"
    out.write_text("\n".join(lines))
    return out


def test_nsys_fractional_instances_and_min_above_max_are_refused(campaign: Path, tmp_path: Path) -> None:
    bad = _nsys_field(tmp_path, 2, "2.5")  # Instances
    line = _error_line(run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(bad),
                               ok=False).output)
    assert "column 'Instances': expected a whole number of launches, got '2.5'" in line
    bad = _nsys_field(tmp_path, 5, "99999999999")  # Min (ns) above Max (ns)
    line = _error_line(run_cli("import_nsys", "--campaign", str(campaign), "--cell-id", "c1", str(bad),
                               ok=False).output)
    assert "flash_attention_prefill_f16" in line and "Min 99999999999 ns is above Max 57816302 ns" in line
    assert not _cell(campaign, "kernel_times.json").exists()


def test_samples_share_pct_as_fractions_is_refused(campaign: Path, tmp_path: Path) -> None:
    src = DATA / "samples" / "zymtrace_like_gpu_kernels.csv"
    rows = [x for x in src.read_text().splitlines() if x and not x.startswith("#")]
    counts = [int(r.rsplit(",", 1)[1]) for r in rows[1:]]
    bad = tmp_path / "fraction_samples.csv"
    bad.write_text("kernel,samples,share_pct\n" + "".join(
        f"{r.rsplit(',', 1)[0]},{c},{c / sum(counts):.6f}\n" for r, c in zip(rows[1:], counts, strict=True)))
    line = _error_line(run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(bad),
                               ok=False).output)
    assert "fractions of 1, not percents" in line and "Multiply them by 100" in line
    good = tmp_path / "percent_samples.csv"
    good.write_text("kernel,samples,share_pct\n" + "".join(
        f"{r.rsplit(',', 1)[0]},{c},{100 * c / sum(counts):.4f}\n" for r, c in zip(rows[1:], counts, strict=True)))
    run_cli("import_samples", "--campaign", str(campaign), "--cell-id", "c1", str(good), ok=True)


# 9. a write past the file-size limit names its real cause: the scratch copy of a .gz (not the .gz), the cell file
def _limited(args: list[str], tmp_path: Path, limit: int) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a child whose files may grow to `limit` bytes (RLIMIT_FSIZE: writes past it fail with EFBIG,
    as on a full or size-limited disk), TMPDIR in tmp_path."""
    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG to the writer instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([str(Path(sys.executable).parent / "perftunereport"), *args], capture_output=True, text=True,
                          env=env, preexec_fn=cap, check=False)


def test_a_gunzip_into_a_full_scratch_disk_blames_the_scratch_disk(campaign: Path, tmp_path: Path) -> None:
    gz = DATA.parent.parent / "campaigns" / "h200-decoder-layer" / "captures" / "decode" / "layer_basic.ncu-rep.gz"
    run = _limited(["import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(gz)], tmp_path,
                   1 << 20)
    assert run.returncode == 2, run.stderr
    line = _error_line(run.stderr)
    assert f"report '{gz}'" in line and str(tmp_path / "scratch") in line and "(EFBIG)" in line
    assert "The .gz itself is fine" in line and "TMPDIR" in line
    assert "re-compress" not in line
    assert not _cell(campaign, "ncu_kernels.json").exists()


def test_a_cell_write_past_the_size_limit_names_the_file(campaign: Path, tmp_path: Path) -> None:
    rep = DATA / "wild" / "yzwang-cudacode" / "yzwang_profile.ncu-rep"
    run = _limited(["import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(rep),
                    "--hardware-mismatch", "warn"], tmp_path,
                   4096)
    assert run.returncode == 2, run.stderr
    line = _error_line(run.stderr)
    assert "(EFBIG)" in line and f"'{campaign / 'cells' / 'c1'}" in line and "ulimit -f" in line
    assert not list((campaign / "cells" / "c1").glob(".*.tmp"))  # no temp file left behind


@pytest.mark.parametrize(("value", "needle"), [("abc", "(unit 'ms') holds 'abc'"),
                                               ("-5", "is negative (the cell holds '-5 ms')")])
def test_a_bad_raw_value_is_reported_in_the_unit_the_file_prints(campaign: Path, tmp_path: Path, value: str,
                                                                  needle: str) -> None:
    rows = list(csv.reader(RAW_MS.open(newline="")))
    j = rows[0].index("gpu__time_duration.sum")
    assert rows[1][j] == "ms"  # the real export prints durations in ms; the base unit is ns
    rows[2][j] = value
    bad = tmp_path / "bad-raw.csv"
    with bad.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    run = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(bad), ok=False)
    line = _error_line(run.output)
    assert needle in line and f"{bad.name}:3" in line and "'ns'" not in line and "nsecond" not in line


def _trace_doc() -> dict[str, Any]:
    return json.loads(gzip.decompress(TRACE.read_bytes()))


def _import_trace(campaign: Path, path: Path, ok: bool = True) -> tuple[str, dict[str, tuple[int, int]]]:
    """Import a trace into c1; return the output and kernel name -> (instances, total_ns) of the cell."""
    run = run_cli("import_torch_trace", "--campaign", str(campaign), "--cell-id", "c1", str(path), ok=ok)
    if not ok:
        return run.output, {}
    rows = json.loads(_cell(campaign, "kernel_times.json").read_text())["kernels"]
    out: dict[str, tuple[int, int]] = {}
    for r in (r for r in rows if r["source"] == path.name):  # by launching op where the trace has shapes: summed
        n, total = out.get(r["name"], (0, 0))
        out[r["name"]] = (n + r["instances"], total + r["total_ns"])
    return run.output, out


def _write_trace(tmp_path: Path, doc: dict[str, Any], name: str) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_string_dur_is_named_a_string(campaign: Path, tmp_path: Path) -> None:
    doc = _trace_doc()
    first = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    first["dur"] = "30"
    out, _ = _import_trace(campaign, _write_trace(tmp_path, doc, "str_dur.json"), ok=False)
    line = _error_line(out)
    assert "expected 'dur' a JSON number >= 0" in line and 'got the string "30" (write numbers unquoted)' in line


# 10. a torch trace's kernel event written twice is counted once, by name; B/E pairs are kernels too
def test_a_kernel_event_written_twice_is_counted_once_and_named(campaign: Path, tmp_path: Path) -> None:
    _, truth = _import_trace(campaign, TRACE)
    doc = _trace_doc()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    doc["traceEvents"] += [dict(kernels[0]), dict(kernels[0]), dict(kernels[5])]
    out, got = _import_trace(campaign, _write_trace(tmp_path, doc, "twice.json"))
    assert got == truth  # 84 kernels, not 87: the copies add no time
    assert "3 kernel event(s) appear more than once (same stream, name, start and duration)" in out
    assert "vectorized_layer_norm_kernel" in out.replace("\n", "")


def test_a_kernel_with_another_start_is_not_a_copy(campaign: Path, tmp_path: Path) -> None:
    _, truth = _import_trace(campaign, TRACE)
    doc = _trace_doc()
    again = dict(next(e for e in doc["traceEvents"] if e.get("cat") == "kernel"))
    again["ts"] += 100.0  # the same kernel run again later: a real launch
    doc["traceEvents"].append(again)
    out, got = _import_trace(campaign, _write_trace(tmp_path, doc, "again.json"))
    name = again["name"]
    assert got[name] == (truth[name][0] + 1, truth[name][1] + round(again["dur"] * 1000))
    assert "more than once" not in out


def test_kernels_written_as_begin_end_pairs_are_counted(campaign: Path, tmp_path: Path) -> None:
    _, truth = _import_trace(campaign, TRACE)
    doc = _trace_doc()
    events = []
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            b = {k: v for k, v in e.items() if k != "dur"} | {"ph": "B"}
            events += [b, {"ph": "E", "cat": "kernel", "pid": e["pid"], "tid": e["tid"],
                           "ts": round(e["ts"] + e["dur"], 3)}]
        else:
            events.append(e)
    doc["traceEvents"] = events
    out, got = _import_trace(campaign, _write_trace(tmp_path, doc, "begin_end.json"))
    assert got.keys() == truth.keys()
    for name, (n, total) in truth.items():  # end - start of microsecond timestamps near 5.4e12: within 1 ns each
        assert got[name][0] == n and abs(got[name][1] - total) <= n, name
    # an unpaired B is not counted and is named
    doc["traceEvents"].append({"ph": "B", "cat": "kernel", "name": "lonely_kernel", "pid": 0, "tid": 99, "ts": 1.0})
    out, got2 = _import_trace(campaign, _write_trace(tmp_path, doc, "lonely.json"))
    assert "1 kernel 'B'/'E' event(s) without their pair on the same stream are not counted: 'lonely_kernel' x1" \
        in out.replace("\n", " ").replace("  ", " ")
    assert "lonely_kernel" not in got2 and got2 == got


def _raw_rows() -> list[list[str]]:
    return list(csv.reader(RAW_MS.open(newline="")))


def _write_csv(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    return path


def _launches(campaign: Path) -> list[dict[str, Any]]:
    return list(json.loads(_cell(campaign, "ncu_kernels.json").read_text())["kernels"])


# 10. a raw CSV row written twice is one launch (named in a warning); two launches under one ID are refused
def test_a_raw_row_written_twice_is_one_launch(campaign: Path, tmp_path: Path) -> None:
    rows = _raw_rows()
    once = _write_csv(tmp_path / "once-raw.csv", rows)
    run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(once), ok=True)
    truth = _launches(campaign)
    twice = _write_csv(tmp_path / "twice-raw.csv", [*rows, rows[2]])
    run = run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(twice),
                  "--replace", ok=True)
    (got,) = [k for k in _launches(campaign) if k["source"] == twice.name]
    (want,) = [k for k in truth if k["source"] == once.name]
    assert got["launches"] == 1 == want["launches"] and got["launch_ids"] == want["launch_ids"]
    assert got["duration_ns"] == want["duration_ns"]
    flat = " ".join(run.output.split())
    assert "1 row(s) repeat a launch ID already read, with the same values, and are counted once: line 4 = line 3" \
        in flat


def test_two_launches_under_one_id_are_refused(campaign: Path, tmp_path: Path) -> None:
    rows = _raw_rows()
    other = list(rows[2])
    j = rows[0].index("gpu__time_duration.sum")
    other[j] = "2.5"
    bad = _write_csv(tmp_path / "clash-raw.csv", [*rows, other])
    line = _error_line(run_cli("import_ncu", "--campaign", str(campaign), "--cell-id", "c1", "--bundle", str(bad),
                               ok=False).output)
    assert f"{bad.name}:4: launch ID {rows[2][rows[0].index('ID')]} again (first at line 3) with another values" \
        in line
