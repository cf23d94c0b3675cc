"""import_ncu: captures of one cell -> campaigns/<c>/cells/<id>/ncu_kernels.json (+ bundle kernel_internals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.bundle.layout import captured_at, fill_kernel_internals, find_profiles, is_bundle, one_per_capture
from perfreport.config.campaign import load_campaign
from perfreport.config.ceilings import load_ceilings
from perfreport.errors import InputError, PerfReportError
from perfreport.files import locked
from perfreport.ids import check_id
from perfreport.kernels.cells import FILE_NAME, check_source, merge_sources, read_cell, source_id, write_cell
from perfreport.kernels.identity import check_name_length
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.derive import DeriveContext
from perfreport.ncu.model import Capture
from perfreport.ncu.read import is_report, read_export
from perfreport.ncu.rep.reader import FileHash
from perfreport.progress import Progress


@dataclass
class ImportResult:
    """What one import wrote, for the CLI summary."""

    path: Path
    campaign: str
    cell_id: str
    hardware: str
    sources: list[dict[str, Any]]
    kernels: list[dict[str, Any]]  # the kernels of the sources imported now
    warnings: list[str] = field(default_factory=list)


def _source_record(capture: Capture, source_id: str, n_kernels: int) -> dict[str, Any]:
    return {
        "id": source_id,
        "file": source_id,
        "format": capture.source_format,
        "sha256": capture.sha256,
        "ncu_version": capture.ncu_version,
        "gpu": capture.gpu,
        "section_set": capture.section_set,
        "command_line": capture.command_line,
        "sections": capture.sections,
        "kernels": n_kernels,
        "launches": len(capture.launches),
        "warnings": list(capture.warnings),
    }


def _inputs(bundle_path: Path) -> list[Path]:
    if bundle_path.is_dir():
        if not is_bundle(bundle_path):
            raise PerfReportError(
                f"bundle '{bundle_path}': a folder without ncu-profiles/. Expected an evidence bundle "
                f"(`perftunereport bundle init --id ID`) or a single .ncu-rep / CSV file."
            )
        return one_per_capture(find_profiles(bundle_path))
    return [bundle_path]


def _early_inputs(bundle_path: Path) -> list[Path] | None:
    """The inputs, if they can be listed now (None: the error is raised in order, after the config's)."""
    try:
        return _inputs(bundle_path)
    except PerfReportError:
        return None


def _unmeasured_warning(path: Path, kernels: list[dict[str, Any]], section_set: str | None) -> list[str]:
    missing = [k for k in kernels if not k["ai_measured"]]
    if not missing:
        return []
    no_flops = sum(1 for k in missing if k["flops"] is None or k["flops"]["total"] is None)
    no_bytes = sum(1 for k in missing if k["dram_bytes"] is None)
    what = " and ".join(p for p in (f"{no_flops} without FLOP counters" if no_flops else "",
                                    f"{no_bytes} without DRAM byte counters" if no_bytes else "") if p)
    return [
        f"capture '{path.name}': {len(missing)} of {len(kernels)} kernel(s) have no arithmetic intensity ({what}; "
        f"section set {section_set or 'unknown'}); AI left null, not estimated. Re-capture with --set full or "
        f"--set roofline to place them on the roofline."
    ]


def import_ncu(campaign_dir: Path, cell_id: str, bundle_path: Path, strict: bool = False,
               progress: Progress | None = None, rep_reader: str = "auto", replace: bool = False) -> ImportResult:
    """Read every capture, derive, then write the cell file once (nothing is written if any input fails).

    `progress` (the CLI prints to stderr) gets one line per input file and, for a large report, a line about
    every tenth of its kernels. `rep_reader` "ncu_report" reads reports with NVIDIA's module only (rep.read_rep).
    `replace` lets a file outside the campaign replace a source of the same name but other content.
    Concurrent imports into one cell take turns on the cell's lock: each merges into what the other wrote.
    """
    check_id("cell", cell_id)
    early = _early_inputs(bundle_path)
    # a report's SHA-256 costs about its whole parse (docs/ncu_rep.md): it runs on the second core meanwhile
    hashes = {p: FileHash(p) for p in early or [] if p.is_file() and is_report(p)}
    try:
        campaign = load_campaign(campaign_dir, strict=strict)
        cell = campaign.cell(cell_id)
        ceilings = load_ceilings(campaign.ceilings_override)
        if not ceilings.has_hardware(campaign.hardware):
            raise PerfReportError(
                f"{campaign_dir}/config.yaml: hardware {campaign.hardware!r} is not in sol-ceilings.yaml; "
                f"expected one of {', '.join(ceilings.hardware_keys())}. Fix `hardware:` or add it via "
                f"`ceilings_override:`."
            )
        ctx = DeriveContext(ceilings=ceilings, hardware=campaign.hardware)
        warnings = list(campaign.warnings)
        sources: list[dict[str, Any]] = []
        kernels: list[dict[str, Any]] = []
        unanchored: list[tuple[dict[str, Any], Path]] = []
        inputs = early if early is not None else _inputs(bundle_path)
        for i, path in enumerate(inputs, 1):
            if progress is not None:
                size = f" ({path.stat().st_size / 1e6:.1f} MB)" if path.is_file() else ""
                progress(f"[{i}/{len(inputs)}] reading {path.name}{size}")
            # rule results (guided analysis) go to each kernel row's `rules`, for the kernel page
            capture = read_export(path, progress, hashes.get(path), rep_reader)
            for launch in capture.launches:
                check_name_length(launch.name, f"'{path}': launch {launch.launch_id}")
            sid, anchored = source_id(path, campaign.dir, bundle_path if bundle_path.is_dir() else None)
            try:
                entries = summarize_capture(capture, ctx, sid)
            except InputError as exc:  # derivation names the kernel and launch; the file is named here
                raise InputError(f"'{path}': {exc.message}") from None
            if path in hashes:  # started before the config was read; collected once the derivation is done
                capture.sha256 = hashes[path].result()
            sources.append(_source_record(capture, sid, len(entries)))
            if not anchored:
                unanchored.append((sources[-1], path))
            kernels.extend(entries)
            warnings.extend(f"capture '{path.name}': {w}" for w in capture.warnings)
            warnings.extend(_unmeasured_warning(path, entries, capture.section_set))
        if strict and warnings:
            raise PerfReportError("--strict: import refused because of warnings:\n" +
                                  "\n".join(f"  - {w}" for w in warnings))
        out = cell.cell_dir(campaign) / FILE_NAME
        header = {"campaign": campaign.id, "cell_id": cell.id, "hardware": campaign.hardware,
                  "ceilings_sources": [Path(s).name for s in ceilings.sources]}
        with locked(out, progress):
            existing = read_cell(out)
            for source, path in unanchored:
                check_source(existing, source, path, replace)
            write_cell(out, merge_sources(existing, header, sources, kernels))
        if bundle_path.is_dir():
            fill_kernel_internals(bundle_path, [_internals(k) for k in kernels], captured_at(inputs), _method(sources))
        return ImportResult(out, campaign.id, cell.id, campaign.hardware, sources, kernels, warnings)
    finally:  # a refused import leaves no hash reading its files (a caller may rewrite them next)
        for h in hashes.values():
            h.close()


def _method(sources: list[dict[str, Any]]) -> str:
    parts = [f"{s['file']} ({s['format']}, set {s['section_set'] or 'unknown'}, ncu {s['ncu_version'] or '?'})"
             for s in sources]
    return "Nsight Compute: " + "; ".join(parts)


def _internals(k: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": k["name"],
        "function": k["function"],
        "launches": k["launches"],
        "achieved_occupancy_pct": k["achieved_occupancy_pct"],
        "theoretical_occupancy_pct": k["theoretical_occupancy_pct"],
        "dram_throughput_pct_peak": k["dram_throughput_pct"],
        "sm_throughput_pct_peak": k["sm_throughput_pct"],
        "regs_per_thread": k["regs_per_thread"],
        "smem_per_block_bytes": k["smem_per_block_bytes"],
        "block_limit_factor": k["block_limit_factor"],
    }
