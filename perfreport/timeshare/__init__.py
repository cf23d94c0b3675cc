"""Time share per kernel: "how long" (nsys, PyTorch profiler) and "how often" (continuous-profiler samples).

Each verb reads one file, validates the campaign cell, and merges the file's kernels into
campaigns/<c>/cells/<id>/kernel_times.json or kernel_samples.json (nothing is written if anything fails).
Formats and output schemas: docs/timeshare.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign, Cell, load_campaign
from perfreport.errors import InputError
from perfreport.files import locked
from perfreport.ids import check_id
from perfreport.kernels.cells import FILE_NAME as NCU_FILE
from perfreport.kernels.cells import check_source, read_cell, source_id
from perfreport.kernels.identity import check_name_length
from perfreport.timeshare import store
from perfreport.timeshare.model import Parsed, TimeshareResult, decode_text, read_input, sha256
from perfreport.timeshare.nsys_csv import EXPECTED as NSYS_EXPECTED
from perfreport.timeshare.nsys_csv import read_nsys_csv
from perfreport.timeshare.nsys_sqlite import MAGIC as SQLITE_MAGIC
from perfreport.timeshare.nsys_sqlite import read_nsys_sqlite
from perfreport.timeshare.samples import EXPECTED as SAMPLES_EXPECTED
from perfreport.timeshare.samples import read_samples
from perfreport.timeshare.torch_trace import EXPECTED as TORCH_EXPECTED
from perfreport.timeshare.torch_trace import read_torch_trace

__all__ = ["TimeshareResult", "import_nsys", "import_samples", "import_torch_trace"]


def _cell(campaign_dir: Path, cell_id: str) -> tuple[Campaign, Cell]:
    check_id("cell", cell_id)
    campaign = load_campaign(campaign_dir)
    return campaign, campaign.cell(cell_id)


def _store(target: tuple[Campaign, Cell], path: Path, data: bytes, parsed: Parsed, kind: str,
           replace: bool, trial: int | None = None) -> TimeshareResult:
    campaign, cell = target
    out = cell.cell_dir(campaign) / store.FILES[kind]
    sid, anchored = source_id(path, campaign.dir)
    for row in parsed.rows:
        check_name_length(row["name"], f"'{path}'")
    if kind == "kernel_times":
        rows, rank = store.time_rows(parsed, sid, path), "total_ns"
    else:
        rows, rank = store.sample_rows(parsed, sid), "samples"
    source = store.source_record(parsed, sid, sha256(data), len(rows), check_trial(trial))
    header: dict[str, Any] = {"campaign": campaign.id, "cell_id": cell.id}
    with locked(out):  # concurrent importers into one cell take turns; each merges what the other wrote
        existing = store.read_existing(out)
        if not anchored:
            check_source(existing, source, path, replace)
        store.write(out, store.merge(existing, header, source, rows, rank), kind)
    warnings = [*campaign.warnings, *(f"'{path.name}': {w}" for w in parsed.warnings)]
    if kind == "kernel_times" and (unmatched := _mostly_unmatched(path, rows, cell.cell_dir(campaign), cell.id)):
        warnings.append(unmatched)
    return TimeshareResult(out, campaign.id, cell.id, kind, [source], rows, warnings)


UNMATCHED_WARN = 0.5  # a timeline whose time mostly matches no captured kernel was likely of another workload
# kernel-row vendor -> (the counter profiler of its rows, how to make it capture more kernels)
COUNTER_TOOLS = {"nvidia": ("ncu", "ncu --kernel-name regex:..."),
                 "amd": ("rocprof-compute", "rocprof-compute profile --kernel NAME ...")}


def _mostly_unmatched(path: Path, rows: list[dict[str, Any]], cell_dir: Path, cell_id: str) -> str | None:
    """The warning for a timeline most of whose kernel time matches no kernel ncu captured in the cell (by function,
    as the warehouse joins), naming the largest unmatched kernels; None when the cell has no capture yet."""
    ncu = read_cell(cell_dir / NCU_FILE)
    if ncu is None or not rows:
        return None
    captured = {str(k.get("function")) for k in ncu.get("kernels", [])}
    # a row without vendor came from ncu (kernels/row.py); name the profiler the cell's counters came from
    vendors = sorted({str(k.get("vendor") or "nvidia") for k in ncu.get("kernels", [])}) or ["nvidia"]
    tool = " or ".join(COUNTER_TOOLS.get(v, COUNTER_TOOLS["nvidia"])[0] for v in vendors)
    fix = " or ".join(COUNTER_TOOLS.get(v, COUNTER_TOOLS["nvidia"])[1] for v in vendors)
    total = sum(int(r["total_ns"]) for r in rows)
    missing: dict[str, int] = {}
    for r in rows:
        if str(r["function"]) not in captured:
            missing[str(r["function"])] = missing.get(str(r["function"]), 0) + int(r["total_ns"])
    lost = sum(missing.values())
    if not total or lost <= UNMATCHED_WARN * total:
        return None
    top = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{name[:60]!r} {ns / 1e6:.3f} ms" for name, ns in top[:5])
    more = f" and {len(top) - 5} more" if len(top) > 5 else ""
    return (f"'{path.name}': {100 * lost / total:.0f}% of its kernel time ({lost / 1e6:.3f} of {total / 1e6:.3f} ms) "
            f"matches no kernel {tool} captured in cell {cell_id}: {named}{more}. That time joins no counters (no "
            f"roof, no %SoL): check that the timeline and the {tool} capture ran the same workload, or capture these "
            f"kernels too ({fix}).")


def check_trial(trial: int | None) -> int | None:
    """A trial number is an integer >= 1 (trial 1 is the first repetition); None: the file is no numbered trial."""
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int) or trial < 1):
        raise InputError(f"--trial {trial!r}: expected an integer >= 1 (the repetition this file measured, 1 for the "
                         f"first), e.g. --trial 3")
    return trial


def import_nsys(campaign_dir: Path, cell_id: str, path: Path, replace: bool = False,
                trial: int | None = None) -> TimeshareResult:
    """Import an nsys kernel summary CSV or SQLite export into the cell's kernel_times.json."""
    target = _cell(campaign_dir, cell_id)
    if path.suffix in (".nsys-rep", ".qdrep"):
        raise InputError(
            f"'{path}': a binary nsys report; export it first: `nsys stats --report cuda_gpu_kern_sum --format "
            f"csv --output kern {path.name}` (then import kern_cuda_gpu_kern_sum.csv) or `nsys export --type "
            f"sqlite {path.name}` (then import the .sqlite)."
        )
    data = read_input(path, NSYS_EXPECTED)
    if data.startswith(SQLITE_MAGIC):
        parsed = read_nsys_sqlite(path)
    else:
        parsed = read_nsys_csv(path, decode_text(path, data, NSYS_EXPECTED))
    return _store(target, path, data, parsed, "kernel_times", replace, trial)


def import_torch_trace(campaign_dir: Path, cell_id: str, path: Path, replace: bool = False,
                       trial: int | None = None) -> TimeshareResult:
    """Import the kernel events of a PyTorch profiler Chrome trace into the cell's kernel_times.json."""
    target = _cell(campaign_dir, cell_id)
    data = read_input(path, TORCH_EXPECTED)
    return _store(target, path, data, read_torch_trace(path, data), "kernel_times", replace, trial)


def import_samples(campaign_dir: Path, cell_id: str, path: Path, replace: bool = False,
                   sample_type: str | None = None, trial: int | None = None) -> TimeshareResult:
    """Import a continuous profiler's samples (pprof, folded stacks, per-kernel CSV/JSON) into kernel_samples.json.

    Stack samples go to their CUDA-kernel frame, found by the kernel names the cell already holds (stacks.py);
    `sample_type` picks a pprof profile's sample type.
    """
    campaign, cell = target = _cell(campaign_dir, cell_id)
    data = read_input(path, SAMPLES_EXPECTED)
    parsed = read_samples(path, data, cell.cell_dir(campaign), sample_type)
    return _store(target, path, data, parsed, "kernel_samples", replace, trial)
