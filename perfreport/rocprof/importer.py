"""import_rocprof: one rocprof-compute workload folder -> campaigns/<c>/cells/<id>/ncu_kernels.json (the cell file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.config.campaign import load_campaign
from perfreport.config.capture_ceilings import FROM_CAPTURE
from perfreport.errors import InputError, PerfReportError
from perfreport.files import locked
from perfreport.ids import check_id
from perfreport.kernels import MISMATCH_CHOICES
from perfreport.kernels.cells import (
    FILE_NAME,
    ImportResult,
    check_source,
    merge_sources,
    read_cell,
    source_id,
    write_cell,
)
from perfreport.kernels.identity import check_name_length
from perfreport.progress import Progress
from perfreport.rocprof import ceilings as amd
from perfreport.rocprof.context import FORMAT, missing_context
from perfreport.rocprof.derive import ROCPROF_KEY, make_context, summarize
from perfreport.rocprof.read import Workload, read_workload

SOURCE_SYSINFO = ("gpu_model", "gpu_arch", "cu_per_gpu", "num_xcd", "max_sclk", "cur_sclk", "max_mclk", "cur_mclk",
                  "hbm_bw", "total_l2_chan", "compute_partition", "memory_partition", "rocm_version", "version",
                  "ip_blocks", "command", "workload_name")


def _warnings(w: Workload, kernels: list[dict[str, Any]], rounded: bool, summed: set[str]) -> list[str]:
    out = []
    if rounded:
        out.append("pmc_perf.csv's Start_Timestamp/End_Timestamp are rounded to six significant digits (such as "
                   "1.62068E+14: the CSV went through a spreadsheet): durations, rates, % of peak and %SoL left null. "
                   "Re-export the workload from the profiling machine unedited.")
    if gaps := missing_context(w.sysinfo):
        out.append(f"sysinfo.csv does not record {'; '.join(gaps)}: the kernels import, but publish_to_lake --strict "
                   f"refuses them (a number without its measurement context). Re-profile with rocprof-compute, "
                   f"which writes these columns, and import again.")
    if w.timestamps is None:
        out.append("no timestamps.csv: durations come from pmc_perf.csv alone")
    if not w.pass_of:
        out.append("no perfmon/ pass lists: counters from different passes cannot be told apart (pass_mixed null)")
    if summed:
        out.append(f"no _sum column for {', '.join(sorted(summed))}: the per-instance X[i] columns were summed")
    no_flops = [k["function"] for k in kernels if k["flops"] is None]
    if no_flops:
        out.append(f"{len(no_flops)} of {len(kernels)} kernel(s) without FLOP counters ({w.sysinfo.get('gpu_arch')} "
                   f"collects none, or the workload was profiled without the SQ block): AI left null, not estimated")
    mixed = next((k["pass_mixed"] for k in kernels if k["pass_mixed"]), None)
    if mixed:
        out.append("values combining counters of different perfmon passes (two replays of the kernel; "
                   f"rocprof-compute's docs show impossible ratios from such merges): {', '.join(sorted(mixed))}")
    return out


def _source(w: Workload, sid: str, kernels: list[dict[str, Any]], token: str | None, warnings: list[str]
            ) -> dict[str, Any]:
    info = {k: w.sysinfo.get(k) for k in SOURCE_SYSINFO if k in w.sysinfo}
    return {
        "id": sid, "file": sid, "format": FORMAT, "sha256": w.sha256(), "ncu_version": None,
        "gpu": f"{w.sysinfo.get('gpu_model', '?')} ({w.sysinfo.get('gpu_arch', '?')})",
        "section_set": w.sysinfo.get("ip_blocks") or None, "kernels": len(kernels),
        "launches": sum(k["launches"] for k in kernels), "warnings": warnings,
        "parts": [{"file": f"{sid}/{name}", "sha256": digest} for name, digest in w.files],
        ROCPROF_KEY: {"vendor": "amd", "chip": token, "sysinfo": info, "passes": len(set(w.pass_of.values())),
                      "roofline_csv": w.roofline is not None},
    }


def import_rocprof(campaign_dir: Path, cell_id: str, workload_dir: Path, strict: bool = False,
                   progress: Progress | None = None, replace: bool = False, hardware_mismatch: str = "refuse",
                   device: int = 0) -> ImportResult:
    """Read one workload folder, derive its kernels, then write the cell file once (nothing on any error).

    The GPU is recognized from sysinfo.csv (chips.yaml); a campaign whose `hardware:` is another token is refused,
    or with `hardware_mismatch` "warn" imported with %SoL null. `device`: the roofline.csv row to use (0, as
    rocprof-compute). `replace` lets a folder outside the campaign replace a source of the same id.
    """
    check_id("cell", cell_id)
    if hardware_mismatch not in MISMATCH_CHOICES:
        raise InputError(f"import_rocprof: hardware_mismatch {hardware_mismatch!r}; expected one of "
                         f"{', '.join(MISMATCH_CHOICES)}")
    campaign = load_campaign(campaign_dir, strict=strict)
    cell = campaign.cell(cell_id)
    workload_dir = Path(workload_dir)
    if progress is not None:
        progress(f"reading {workload_dir}")
    w = read_workload(workload_dir)
    token, why = amd.recognize(w)
    warnings = list(campaign.warnings)
    use_roofs = token is not None
    if why:
        warnings.append(f"'{workload_dir}': {why}; %SoL and the achievable % left null")
    if token and campaign.hardware not in (FROM_CAPTURE, token):
        line = (f"'{workload_dir}': profiled on {w.sysinfo.get('gpu_model')} ({token}), not on the campaign's "
                f"hardware {campaign.hardware}")
        if hardware_mismatch != "warn":
            raise InputError(f"{line}. Import it into a campaign with `hardware: {token}` or `hardware: "
                             f"{FROM_CAPTURE}`, or pass --hardware-mismatch warn to import it with %SoL null.")
        warnings.append(f"{line}: %SoL and the achievable % left null (--hardware-mismatch warn)")
        use_roofs = False
    if token and (problem := amd.partition_problem(w)):
        warnings.append(f"'{workload_dir}': {problem}; %SoL and the achievable % left null")
        use_roofs = False
    ctx = make_context(w, token, use_roofs, device)
    sid, anchored = source_id(workload_dir, campaign.dir)
    for row in w.dispatches:
        check_name_length(row["Kernel_Name"], f"'{workload_dir / 'pmc_perf.csv'}': dispatch {row['Dispatch_ID']}")
    kernels = summarize(ctx, sid)
    own = _warnings(w, kernels, ctx.rounded_timestamps, ctx.summed)
    warnings += [f"workload '{sid}': {x}" for x in own]
    if strict and warnings:
        raise PerfReportError("--strict: import refused because of warnings:\n" +
                              "\n".join(f"  - {x}" for x in warnings))
    source = _source(w, sid, kernels, token, own)
    out = cell.cell_dir(campaign) / FILE_NAME
    # the cell's GPU: the workload's chip where it scores the kernels, else (mismatch, --warn) the campaign's
    hardware = token if token and campaign.hardware in (FROM_CAPTURE, token) else str(campaign.hardware)
    header = {"campaign": campaign.id, "cell_id": cell.id, "hardware": hardware,
              "ceilings_sources": [amd.CHIPS_PATH.name] + (["roofline.csv"] if ctx.measured else [])}
    with locked(out, progress):
        existing = read_cell(out)
        if not anchored:
            check_source(existing, source, workload_dir, replace)
        write_cell(out, merge_sources(existing, header, [source], kernels))
    return ImportResult(out, campaign.id, cell.id, hardware, [source], kernels, warnings)
