"""AMD cells in the warehouse: the chip an AMD-only `hardware: from-capture` campaign ran on, and its ceilings.

import_rocprof writes no capture-ceilings.json (those are ncu's device peaks): its cells name their chip token in the
cell file's `hardware` (perfreport/rocprof/chips.yaml), and that chip's datasheet block joins the campaign's ceilings
here, so that the roofline and the pages resolve an AMD kernel's ceiling keys as they do an NVIDIA one's.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from perfreport.config.campaign import Campaign, campaign_ceilings
from perfreport.config.ceilings import Ceilings
from perfreport.errors import InputError
from perfreport.kernels.cells import FILE_NAME as NCU_FILE
from perfreport.rocprof import ceilings as amd


def is_amd(token: str) -> bool:
    """Whether a hardware token is one of chips.yaml's AMD chips."""
    return token in amd.chips()["hardware"]


def _cell_hardware(campaign: Campaign) -> dict[str, list[str]]:
    """{hardware token of the cell file: cell ids}, over the cells that hold a cell file."""
    out: dict[str, list[str]] = {}
    for cell in campaign.cells:
        path = cell.cell_dir(campaign) / NCU_FILE
        if not path.is_file():
            continue
        try:
            token = json.loads(path.read_text(encoding="utf-8")).get("hardware")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            continue  # the warehouse load reports a broken cell file, with its fix
        out.setdefault(str(token), []).append(cell.id)
    return out


def from_capture_hardware(campaign: Campaign) -> Campaign | None:
    """The campaign with `hardware` set to the one AMD chip its cells ran on, for a from-capture campaign that has no
    ncu capture ceilings; None when no cell is AMD. Cells of two chips (or of AMD and NVIDIA) are refused."""
    found = _cell_hardware(campaign)
    chips = sorted(t for t in found if is_amd(t))
    if not chips:
        return None
    if len(found) > 1:
        listed = "; ".join(f"{t}: {', '.join(cells)}" for t, cells in sorted(found.items()))
        raise InputError(f"{campaign.config_path}: hardware: from-capture with cells of several GPUs ({listed}); "
                         f"expected one GPU per campaign, whose ceilings score every kernel. Move the cells of the "
                         f"other GPU into a campaign of their own.")
    return replace(campaign, hardware=chips[0])


def with_amd_ceilings(campaign: Campaign, ceilings: Ceilings) -> Ceilings:
    """The campaign's ceilings plus its AMD chip's datasheet block (chips.yaml), when its hardware is one."""
    if not is_amd(campaign.hardware):
        return ceilings
    return ceilings.with_hardware(campaign.hardware, amd.hardware_block(campaign.hardware), str(Path(amd.CHIPS_PATH)))


def scored(campaign: Campaign) -> tuple[Campaign, Ceilings]:
    """The campaign and ceilings the warehouse scores its kernels with: a from-capture campaign of AMD cells (no ncu
    capture ceilings) takes its cells' chip as hardware and that chip's datasheet, as gather does for the pages."""
    if campaign.from_capture and campaign.capture_ceilings is None:
        campaign = from_capture_hardware(campaign) or campaign
    return campaign, with_amd_ceilings(campaign, campaign_ceilings(campaign))
