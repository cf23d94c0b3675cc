"""Import a whole campaign: every cell's captures (ncu), timelines (nsys, torch trace) and samples, as its config
names them; what `make demo` and the warehouse's callers run before they query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.config.campaign import Campaign, load_campaign
from perfreport.ncu.importer import import_ncu
from perfreport.progress import Progress
from perfreport.timeshare import import_nsys, import_samples, import_torch_trace
from perfreport.timeshare.step_budget import import_cell_steps


def import_campaign(campaign_dir: Path, strict: bool = False, progress: Progress | None = None) -> list[Any]:
    """Import every cell's `captures:` (ncu), `timelines:` (nsys / torch trace), `trials:` (timelines numbered by
    trial), `samples:` and `steps:` (page 3's step budget), as `make demo` does."""
    campaign: Campaign = load_campaign(campaign_dir, strict=strict)
    results: list[Any] = []
    for cell in campaign.cells:
        # one import per cell: its captures together, so the per-metric files of one NERSC run merge by launch ID
        if captures := cell.capture_paths(campaign):
            results.append(import_ncu(campaign_dir, cell.id, captures, strict=strict, progress=progress))
        timelines = [(None, t) for t in cell.timeline_paths(campaign)] + list(cell.trial_paths(campaign))
        for trial, timeline in timelines:
            is_torch = timeline.name.endswith((".json", ".json.gz"))
            importer = import_torch_trace if is_torch else import_nsys
            results.append(importer(campaign_dir, cell.id, timeline, trial=trial))
        for samples in cell.sample_paths(campaign):
            results.append(import_samples(campaign_dir, cell.id, samples))
        if steps := cell.step_paths(campaign):
            results.append(import_cell_steps(campaign_dir, cell.id, steps))
    return results
