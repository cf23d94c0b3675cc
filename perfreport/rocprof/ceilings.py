"""AMD roofs: datasheet ceilings per chip (chips.yaml) and the measured roofline.csv ceilings with their 95% CI."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from perfreport.errors import InputError
from perfreport.rocprof.read import Workload, to_number

CHIPS_PATH = Path(__file__).with_name("chips.yaml")
SPX = ("SPX", "NA", "N/A", "")  # partition modes in which one device is the whole package


@dataclass(frozen=True)
class Roof:
    """One ceiling: key path (token.name or token.empirical.name, sol-ceilings.yaml's grammar), value, kind, and its
    95% CI if measured."""

    key: str
    value: float
    kind: str  # "compute" or "memory"
    low: float | None = None
    high: float | None = None
    source: str = ""


@lru_cache(maxsize=1)
def chips() -> dict[str, Any]:
    """chips.yaml, parsed once (do not mutate)."""
    doc: dict[str, Any] = yaml.safe_load(CHIPS_PATH.read_text(encoding="utf-8"))
    return doc


def _kind(name: str) -> str:
    return "memory" if name.endswith("_tbps") else "compute"


def recognize(w: Workload) -> tuple[str | None, str | None]:
    """(chip token, why none): the one chips.yaml block whose gfx, CU count and model regex fit sysinfo.csv."""
    arch, model = w.sysinfo.get("gpu_arch", "").strip(), w.sysinfo.get("gpu_model", "").strip()
    cus = w.number("cu_per_gpu")
    found = [t for t, b in chips()["hardware"].items() if b["gfx"] == arch and cus == b["cus"]
             and any(re.fullmatch(p, model, re.IGNORECASE) for p in b["models"])]
    if len(found) == 1:
        return found[0], None
    listed = ", ".join(f"{t} ({b['gfx']}, {b['cus']} CUs)" for t, b in chips()["hardware"].items())
    why = (f"sysinfo.csv names {model or '?'} ({arch or '?'}, {cus if cus is None else int(cus)} CUs), which fits "
           f"{'several' if found else 'none'} of chips.yaml's {listed}")
    return None, why


def partition_problem(w: Workload) -> str | None:
    """Why the package datasheet does not apply to this device (a CPX/DPX or NPS4 partition), or None."""
    modes = {k: w.sysinfo.get(k, "").strip() for k in ("compute_partition", "memory_partition")}
    odd = {k: v for k, v in modes.items() if v.upper() not in SPX and not v.upper().startswith("NPS1")}
    if not odd:
        return None
    said = ", ".join(f"{k} {v}" for k, v in odd.items())
    return f"profiled in a partition ({said}): a device is part of the package the datasheet describes"


def datasheet(token: str) -> dict[str, Roof]:
    """The chip's datasheet roofs per profiled device (a package's peaks divided by devices_per_package)."""
    block = chips()["hardware"][token]
    per = float(block.get("devices_per_package", 1))
    split = f" / {per:g}: one of the package's {per:g} devices" if per != 1 else ""
    return {name: Roof(f"{token}.{name}", float(e["value"]) / per, _kind(name), source=e["source"] + split)
            for name, e in block["datasheet"].items()}


def hardware_block(token: str) -> dict[str, Any]:
    """The chip as a sol-ceilings.yaml hardware block (description, per-device datasheet), so that the warehouse and
    the site resolve an AMD cell's ceiling keys as they do an NVIDIA one's; chips.yaml stays their one home."""
    roofs = datasheet(token)
    return {"description": f"{chips()['hardware'][token]['description']} (perfreport/rocprof/chips.yaml)",
            "datasheet": {name: {"value": r.value, "source": r.source} for name, r in roofs.items()}}


def _column(w: Workload, name: str) -> str | None:
    spellings = chips()["roofline"]["spellings"].get(name, [name])
    return next((s for s in spellings if s in w.roofline_columns), None)


def measured(w: Workload, token: str, device: int = 0) -> dict[str, Roof]:
    """roofline.csv's roofs for `device` (rocprof-compute's default 0), in TB/s and TFLOP/s with Low/High as CI."""
    if w.roofline is None:
        return {}
    rows = [r for r in w.roofline if to_number(r.get("device")) == device]
    if not rows:
        got = ", ".join(r.get("device", "?") for r in w.roofline)
        raise InputError(f"'{w.path / 'roofline.csv'}': no row for device {device} (got device {got}); pass the "
                         f"device the workload ran on, or re-run the roofline benchmark on it.")
    row, spec = rows[0], chips()["roofline"]
    out: dict[str, Roof] = {}
    for name, roof in spec["roofs"].items():
        col = roof["column"]
        mean = to_number(row.get(col)) if col in w.roofline_columns else None
        if mean is None:
            continue
        low_col, high_col = _column(w, col + "Low"), _column(w, col + "High")
        low = to_number(row.get(low_col)) if low_col else None
        high = to_number(row.get(high_col)) if high_col else None
        s = float(spec["unit_scale"])
        out[name] = Roof(f"{token}.empirical.{name}", mean * s, _kind(name), None if low is None else low * s,
                         None if high is None else high * s,
                         f"roofline.csv device {device}: {col} (mean of the benchmark's runs), 95% CI "
                         f"{low_col or '?'}..{high_col or '?'}")
    return out


def achievable_for(datasheet_name: str, roofs: dict[str, Roof]) -> Roof | None:
    """The measured roof standing for a datasheet one (chips.yaml roofline.roofs[].datasheet), if measured."""
    for name, roof in chips()["roofline"]["roofs"].items():
        if roof.get("datasheet") == datasheet_name and name in roofs:
            return roofs[name]
    return None
