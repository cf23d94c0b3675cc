"""import_ncu: captures of one cell -> campaigns/<c>/cells/<id>/ncu_kernels.json (+ bundle kernel_internals)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfreport.bundle.layout import captured_at, fill_kernel_internals, find_profiles, is_bundle, one_per_capture
from perfreport.config import capture_ceilings
from perfreport.config.campaign import Campaign, campaign_ceilings, load_campaign
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
from perfreport.ncu.aggregate import summarize_capture
from perfreport.ncu.csv import merge
from perfreport.ncu.csv.merge import PerMetric, parts_record
from perfreport.ncu.derive import DeriveContext, device_name, device_peaks
from perfreport.ncu.model import Capture
from perfreport.ncu.read import is_report, read_export
from perfreport.ncu.rep.reader import FileHash
from perfreport.progress import Progress


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


def _all_inputs(bundle_paths: list[Path]) -> list[tuple[Path, Path | None]]:
    """Every input file with the bundle folder it came from (None: given as a file); each file once."""
    out: list[tuple[Path, Path | None]] = []
    seen: dict[Path, Path] = {}
    for given in bundle_paths:
        for path in _inputs(given):
            key = path.resolve()
            if key in seen:
                raise InputError(
                    f"'{path}': given twice (also as '{seen[key]}'); expected each capture once. Drop one --bundle.")
            seen[key] = path
            out.append((path, given if given.is_dir() else None))
    return out


def _early_inputs(bundle_paths: list[Path]) -> list[tuple[Path, Path | None]] | None:
    """The inputs, if they can be listed now (None: the error is raised in order, after the config's)."""
    try:
        return _all_inputs(bundle_paths)
    except PerfReportError:
        return None


def _unmeasured_warning(name: str, kernels: list[dict[str, Any]], section_set: str | None) -> list[str]:
    missing = [k for k in kernels if not k["ai_measured"]]
    if not missing:
        return []
    no_flops = sum(1 for k in missing if k["flops"] is None or k["flops"]["total"] is None)
    no_bytes = sum(1 for k in missing if k["dram_bytes"] is None)
    what = " and ".join(p for p in (f"{no_flops} without FLOP counters" if no_flops else "",
                                    f"{no_bytes} without DRAM byte counters" if no_bytes else "") if p)
    return [
        f"capture '{name}': {len(missing)} of {len(kernels)} kernel(s) have no arithmetic intensity ({what}; "
        f"section set {section_set or 'unknown'}); AI left null, not estimated. Re-capture with --set full, or "
        f"add --section SpeedOfLight_RooflineChart (an ncu whose `--list-sets` shows a roofline set takes "
        f"--set roofline too), "
        f"to place them on the roofline."
    ]


@dataclass
class _Part:
    """One per-metric file read, held until its run's other files are read (see ncu/csv/merge.py)."""

    path: Path
    bundle: Path | None
    capture: Capture
    found: PerMetric



@dataclass
class _Run:
    """What one import gathers: sources, kernels (with the bundle each came from), warnings."""

    campaign_dir: Path
    ctx: DeriveContext
    warnings: list[str]
    sources: list[dict[str, Any]] = field(default_factory=list)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    bundles: list[Path | None] = field(default_factory=list)  # per kernel: its bundle folder
    unanchored: list[tuple[dict[str, Any], Path]] = field(default_factory=list)
    mismatch: str = "refuse"  # a capture from another GPU than the campaign's: "refuse", or "warn" (%SoL null)

    def gpu_context(self, capture: Capture, where: Path) -> DeriveContext:
        """The context one source derives in: the campaign's hardware where the capture ran on that GPU (its
        device__attribute_display_name and CC, the ground truth); another GPU is refused, or with
        --hardware-mismatch warn scored against no roof (%SoL null) and said."""
        hardware = self.ctx.hardware
        if hardware is None:
            return self.ctx
        ceilings = self.ctx.ceilings
        gpus = sorted({(name, k.cc or "") for k in capture.launches if (name := device_name(k))})
        if not gpus:
            if capture.launches:
                capture.warnings.append(
                    f"the export records no GPU name (no device__attribute_display_name): %SoL is scored against "
                    f"the campaign's hardware {hardware} as given; re-export with the device attributes "
                    f"(`ncu --csv --page raw` keeps them) to have it checked")
            return self.ctx
        other = [(n, cc) for n, cc in gpus if ceilings.matches_device(hardware, n, cc) is False]
        if not other:
            return self.ctx
        name, cc = other[0]
        token = ceilings.hardware_for_device(name, cc)
        theirs = f"hardware {token}" if token else "a GPU sol-ceilings.yaml has no token for"
        line = (f"'{where}': captured on {name!r} (CC {cc or '?'}, {theirs}), not on the campaign's hardware "
                f"{hardware} ({ceilings.description(hardware)}): its %SoL would be scored against another GPU's "
                f"roofs")
        if self.mismatch != "warn":
            fix = f"`hardware: {token}`" if token else "its own hardware token (ceilings_override:)"
            raise InputError(f"{line}. Import it into a campaign with {fix}, or pass --hardware-mismatch warn to "
                             f"import it with %SoL left null.")
        capture.warnings.append(f"captured on {name!r} (CC {cc or '?'}, {theirs}), not on the campaign's hardware "
                                f"{hardware}: imported with %SoL, the achievable % and the verdict's roofs left "
                                f"null (--hardware-mismatch warn)")
        return DeriveContext(ceilings=ceilings, hardware=None)

    def add_file(self, capture: Capture, path: Path, bundle: Path | None, digest: FileHash | None) -> None:
        """Derive and record one file's capture (not a per-metric part)."""
        sid, anchored = source_id(path, self.campaign_dir, bundle)
        self.add(capture, path.name, path, sid, anchored, bundle, digest=digest)

    def from_capture(self, campaign: Campaign, held: list[tuple[Capture, Path, Path | None]],
                     per_metric: dict[Path | None, list[_Part]]) -> dict[str, Any]:
        """hardware: from-capture: the campaign's ceilings grown by ncu's device peaks of these captures, which
        then derive against them (config/capture_ceilings.py). One campaign holds one GPU's captures: a capture
        from another GPU than the one its ceilings came from is refused, as are captures with no GPU name or
        no peaks before any ceiling is known."""
        files = [(c, p) for c, p, _ in held] + [(part.capture, part.path) for parts in per_metric.values()
                                                for part in parts]
        doc = capture_ceilings.read(campaign.dir)  # again, under the lock: another import may have grown it
        gpus = sorted({(name, k.cc or ""): p for c, p in files for k in c.launches
                       if (name := device_name(k))}.items())
        if doc is not None:
            want = (doc["gpu"], doc["cc"] or "")
            for (name, cc), at in gpus:
                if (name, cc) != want:
                    raise InputError(
                        f"'{at}': captured on {name!r} (CC {cc or '?'}), not on {want[0]!r} (CC {want[1] or '?'}) "
                        f"whose ncu peaks are this campaign's ceilings ({capture_ceilings.path_of(campaign.dir)}, "
                        f"hardware: {capture_ceilings.FROM_CAPTURE}); a campaign holds one GPU's kernels. Import "
                        f"it into a campaign of its own.")
        elif not gpus:
            named = ", ".join(f"'{p}'" for _, p in files) or "no capture"
            raise InputError(
                f"hardware: {capture_ceilings.FROM_CAPTURE} takes the GPU and its peaks from the captures, but "
                f"{named} record(s) no GPU name (device__attribute_display_name). Re-export with the device "
                f"attributes (`ncu --csv --page raw` keeps them), or name the GPU's token in `hardware:`.")
        elif len(gpus) > 1:
            listed = "; ".join(f"{n!r} (CC {cc or '?'}) in '{p}'" for (n, cc), p in gpus)
            raise InputError(f"captures from {len(gpus)} GPUs: {listed}; a campaign with hardware: "
                             f"{capture_ceilings.FROM_CAPTURE} holds one GPU's kernels. Import each GPU's captures "
                             f"into a campaign of its own.")
        gpu, cc = (doc["gpu"], doc["cc"] or "") if doc is not None else gpus[0][0]
        launches = [k for c, _ in files for k in c.launches if device_name(k) == gpu]
        where = ", ".join(f"'{p.name}'" for _, p in files)
        grown = capture_ceilings.grow(doc, gpu, cc, device_peaks(launches, self.ctx.ceilings, where))
        if not grown["ceilings"]:
            raise InputError(
                f"{where}: hold none of ncu's device peaks for {gpu!r} (dram__bytes.sum.peak_sustained, the "
                f"*.peak_sustained FMA and tensor-path counters, with the clocks), so hardware: "
                f"{capture_ceilings.FROM_CAPTURE} has no ceiling to score them against. Capture with --set full "
                f"(or --section SpeedOfLight_RooflineChart), or name the GPU's token in `hardware:`.")
        # the loaded ceilings, their from-capture block (if any) replaced by the grown one: no file read again
        ceilings = self.ctx.ceilings.with_hardware(grown["token"], capture_ceilings.hardware_block(grown),
                                                   str(capture_ceilings.path_of(campaign.dir)))
        self.ctx = DeriveContext(ceilings=ceilings, hardware=grown["token"])
        return grown

    def add(self, capture: Capture, name: str, where: Path, sid: str, anchored: bool, bundle: Path | None,
            parts: list[tuple[str, str]] | None = None, digest: FileHash | None = None) -> None:
        """Derive one source's kernels and record the source (`where`: the file named in errors).

        `digest`: a report's hash, started before the config was read; collected once the derivation is done.
        """
        for launch in capture.launches:
            check_name_length(launch.name, f"'{where}': launch {launch.launch_id}")
        ctx = self.gpu_context(capture, where)
        try:
            entries = summarize_capture(capture, ctx, sid)
        except InputError as exc:  # derivation names the kernel and launch; the file is named here
            raise InputError(f"'{where}': {exc.message}") from None
        if digest is not None:
            capture.sha256 = digest.result()
        source = _source_record(capture, sid, len(entries))
        if parts is not None:
            source["parts"] = parts_record(parts)
        self.sources.append(source)
        if not anchored:
            self.unanchored.append((source, where))
        self.kernels.extend(entries)
        self.bundles.extend([bundle] * len(entries))
        self.warnings.extend(f"capture '{name}': {w}" for w in capture.warnings)
        self.warnings.extend(_unmeasured_warning(name, entries, capture.section_set))

    def add_per_metric(self, parts: list[_Part], cell_id: str) -> None:
        """Merge one folder's per-metric files into one source; refuse a lone one whose run lies beside it."""
        if len(parts) == 1:
            part = parts[0]
            others = merge.siblings(part.path, part.found) if part.bundle is None else []
            if others:
                raise merge.lone_file_error(part.path, part.found, others, self.campaign_dir, cell_id)
            sid, anchored = source_id(part.path, self.campaign_dir, part.bundle)
            part.capture.warnings.append(merge.lone_file_warning(part.path, part.found))
            self.add(part.capture, part.path.name, part.path, sid, anchored, part.bundle)
            return
        ids = [source_id(p.path, self.campaign_dir, p.bundle) for p in parts]
        capture = merge.merge_per_metric([(sid, p.capture) for (sid, _), p in zip(ids, parts, strict=True)])
        sid = merge.merged_id([i for i, _ in ids])
        given = {p.path.resolve() for p in parts}
        others = [] if parts[0].bundle else [o for o in merge.siblings(parts[0].path, parts[0].found)
                                             if o[0].resolve() not in given]
        if others:
            capture.warnings.append(merge.missing_siblings_warning([p.path for p in parts], others))
        self.add(capture, sid, parts[0].path, sid, all(a for _, a in ids), parts[0].bundle,
                 [(i, p.capture.sha256) for (i, _), p in zip(ids, parts, strict=True)])


def import_ncu(campaign_dir: Path, cell_id: str, bundle_path: Path | Sequence[Path], strict: bool = False,
               progress: Progress | None = None, rep_reader: str = "auto", replace: bool = False,
               hardware_mismatch: str = "refuse") -> ImportResult:
    """Read every capture, derive, then write the cell file once (nothing is written if any input fails).

    `bundle_path`: a file or bundle folder, or several (`--bundle` repeated). The per-metric CSV files of one run
    (the NERSC recipe, one `ncu --csv --metrics M` file per metric) among the files given, or in one folder of a
    bundle, merge into one source by launch ID (ncu/csv/merge.py); one given alone while the others of its run lie
    beside it is refused with the command that imports them together.
    `progress` (the CLI prints to stderr) gets one line per input file and, for a large report, a line about
    every tenth of its kernels. `rep_reader` "ncu_report" reads reports with NVIDIA's module only (rep.read_rep).
    `replace` lets a file outside the campaign replace a source of the same name but other content.
    `hardware_mismatch` "warn" imports a capture from another GPU than the campaign's with %SoL null (else refused).
    Concurrent imports into one cell take turns on the cell's lock: each merges into what the other wrote.
    """
    check_id("cell", cell_id)
    if hardware_mismatch not in MISMATCH_CHOICES:
        raise InputError(f"import_ncu: hardware_mismatch {hardware_mismatch!r}; expected one of "
                         f"{', '.join(MISMATCH_CHOICES)}")
    given = [Path(bundle_path)] if isinstance(bundle_path, str | Path) else [Path(p) for p in bundle_path]
    if not given:
        raise InputError("import_ncu: no capture given; expected at least one --bundle (a file or a bundle folder).")
    early = _early_inputs(given)
    # a report's SHA-256 costs about its whole parse (docs/ncu_rep.md): it runs on the second core meanwhile
    hashes = {p: FileHash(p) for p, _ in early or [] if p.is_file() and is_report(p)}
    try:
        campaign = load_campaign(campaign_dir, strict=strict)
        cell = campaign.cell(cell_id)
        ceilings = campaign_ceilings(campaign)
        if not campaign.from_capture and not ceilings.has_hardware(campaign.hardware):
            raise PerfReportError(
                f"{campaign_dir}/config.yaml: hardware {campaign.hardware!r} is not in sol-ceilings.yaml; "
                f"expected one of {', '.join(ceilings.hardware_keys())}. Fix `hardware:` or add it via "
                f"`ceilings_override:`."
            )
        run = _Run(campaign.dir, DeriveContext(ceilings=ceilings, hardware=campaign.hardware), list(campaign.warnings),
                   mismatch=hardware_mismatch)
        inputs = early if early is not None else _all_inputs(given)
        per_metric: dict[Path | None, list[_Part]] = {}  # per bundle folder (None: the files given): its files
        held: list[tuple[Capture, Path, Path | None]] = []  # from-capture: derived once the GPU's peaks are read
        for i, (path, bundle) in enumerate(inputs, 1):
            if progress is not None:
                size = f" ({path.stat().st_size / 1e6:.1f} MB)" if path.is_file() else ""
                progress(f"[{i}/{len(inputs)}] reading {path.name}{size}")
            # rule results (guided analysis) go to each kernel row's `rules`, for the kernel page
            capture = read_export(path, progress, hashes.get(path), rep_reader)
            found = merge.per_metric(path, capture)
            if found is not None:
                per_metric.setdefault(path.parent if bundle else None, []).append(_Part(path, bundle, capture, found))
            elif campaign.from_capture:
                held.append((capture, path, bundle))
            else:
                run.add_file(capture, path, bundle, hashes.get(path))
        with ExitStack() as stack:
            grown = None
            if campaign.from_capture:  # one import at a time grows the campaign's ceilings
                stack.enter_context(locked(capture_ceilings.path_of(campaign.dir), progress))
                grown = run.from_capture(campaign, held, per_metric)
                for capture, path, bundle in held:
                    run.add_file(capture, path, bundle, hashes.get(path))
            for parts in per_metric.values():
                run.add_per_metric(parts, cell_id)
            warnings = run.warnings
            if strict and warnings:
                raise PerfReportError("--strict: import refused because of warnings:\n" +
                                      "\n".join(f"  - {w}" for w in warnings))
            out = cell.cell_dir(campaign) / FILE_NAME
            header = {"campaign": campaign.id, "cell_id": cell.id, "hardware": run.ctx.hardware,
                      "ceilings_sources": [Path(s).name for s in run.ctx.ceilings.sources]}
            with locked(out, progress):
                existing = read_cell(out)
                for source, path in run.unanchored:
                    check_source(existing, source, path, replace)
                if grown is not None and grown != campaign.capture_ceilings:
                    capture_ceilings.write(campaign.dir, grown)
                write_cell(out, merge_sources(existing, header, run.sources, run.kernels))
        for folder in dict.fromkeys(b for _, b in inputs if b is not None):
            mine = [k for k, b in zip(run.kernels, run.bundles, strict=True) if b == folder]
            files = [p for p, b in inputs if b == folder]
            fill_kernel_internals(folder, [_internals(k) for k in mine], captured_at(files),
                                  _method([s for s in run.sources if any(k["source"] == s["id"] for k in mine)]))
        return ImportResult(out, campaign.id, cell.id, str(run.ctx.hardware), run.sources, run.kernels,
                            warnings)
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
