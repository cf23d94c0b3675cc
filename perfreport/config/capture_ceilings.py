"""`hardware: from-capture`: a campaign whose ceilings are ncu's own device peaks, read from its captures.

The first import_ncu into such a campaign writes <campaign>/capture-ceilings.json: the GPU the captures ran on
(display name, CC), a hardware token for it, and per ceiling name (bf16_dense_tflops, fp32_tflops, hbm_tbps, ...)
ncu's peak (per-cycle peak_sustained x the clock ncu measured), each with the counters it came from. Later imports
add ceilings the file lacks and never change one it holds, so every kernel of the campaign is scored against the
same values. These peaks are ncu's at the clocks it saw, not a datasheet or a measured ceiling: such a campaign
runs at sol_rigor L1 or L2 only (RIGOR_LEVELS), and every ceiling's source says where it came from.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from perfreport.errors import InputError
from perfreport.files import write_json_atomic

FROM_CAPTURE = "from-capture"
FILE_NAME = "capture-ceilings.json"
SCHEMA_VERSION = 1
RIGOR = "ncu device peak"
RIGOR_LEVELS = ("L1", "L2")  # ncu's peaks at the clocks it saw stand below a datasheet or a measured ceiling
_KEYS = {"schema_version", "token", "gpu", "cc", "rigor", "ceilings"}
_CEILING = re.compile(r"[a-z0-9_]+_(tflops|tops|tbps)")


def token_for(display_name: str, cc: str | None) -> str:
    """The hardware token of a from-capture GPU: capture_<display name as a slug>[_sm<CC>], e.g.
    'NVIDIA H800 PCIe' CC 9.0 -> capture_nvidia_h800_pcie_sm90 (a key path holds no dots)."""
    slug = re.sub(r"[^a-z0-9]+", "_", display_name.lower()).strip("_") or "gpu"
    major_minor = re.sub(r"[^0-9]", "", cc or "")
    return f"capture_{slug}" + (f"_sm{major_minor}" if major_minor else "")


def path_of(campaign_dir: Path) -> Path:
    """Where a from-capture campaign keeps its ceilings."""
    return Path(campaign_dir) / FILE_NAME


def read(campaign_dir: Path) -> dict[str, Any] | None:
    """The campaign's from-capture ceilings, validated; None before the first import wrote them."""
    path = path_of(campaign_dir)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise InputError(f"'{path}': expected a plain file written by import_ncu (hardware: from-capture), got a "
                         f"link or a folder; remove it and re-import a capture to write it again.")
    if not path.exists():
        return None
    fix = "remove it and re-import the campaign's captures to write it again"
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"'{path}': not readable JSON ({exc}); {fix}.") from None
    problems = _problems(doc)
    if problems:
        raise InputError(f"'{path}': {'; '.join(problems)}; {fix}.")
    return dict(doc)


def _problems(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return [f"expected a JSON object with {', '.join(sorted(_KEYS))}, got {type(doc).__name__}"]
    out = [f"unknown key {k!r}" for k in sorted(set(doc) - _KEYS)]
    out += [f"missing key {k!r}" for k in sorted(_KEYS - set(doc))]
    if out:
        return out
    if doc["schema_version"] != SCHEMA_VERSION:
        out.append(f"schema_version: expected {SCHEMA_VERSION}, got {doc['schema_version']!r}")
    for key in ("token", "gpu", "rigor"):
        if not isinstance(doc[key], str) or not doc[key].strip():
            out.append(f"{key}: expected a non-empty string, got {doc[key]!r}")
    if isinstance(doc["token"], str) and not re.fullmatch(r"capture_[a-z0-9_]+", doc["token"]):
        out.append(f"token: expected capture_<slug>, got {doc['token']!r}")
    if not (doc["cc"] is None or isinstance(doc["cc"], str)):
        out.append(f"cc: expected a string such as '9.0' or null, got {doc['cc']!r}")
    ceilings = doc["ceilings"]
    if not isinstance(ceilings, dict) or not ceilings:
        return [*out, f"ceilings: expected a non-empty object of ceiling name -> {{value, source}}, got {ceilings!r}"]
    for name, entry in sorted(ceilings.items()):
        if not _CEILING.fullmatch(name):
            out.append(f"ceilings.{name}: expected a ceiling name ending in _tflops, _tops or _tbps")
        elif not (isinstance(entry, dict) and set(entry) == {"value", "source"} and isinstance(entry["source"], str)
                  and isinstance(entry["value"], int | float) and not isinstance(entry["value"], bool)
                  and math.isfinite(entry["value"]) and entry["value"] > 0):
            out.append(f"ceilings.{name}: expected {{value: a positive number, source: text}}, got {entry!r}")
    return out


def grow(doc: dict[str, Any] | None, gpu: str, cc: str | None, peaks: dict[str, tuple[float, str]]
         ) -> dict[str, Any]:
    """The campaign's ceilings after one import: `peaks` (ceiling name -> (value, source), ncu's peaks of the
    captures) fill the names `doc` lacks; a value `doc` holds is kept, so earlier kernels keep their roofs."""
    if doc is None:
        doc = {"schema_version": SCHEMA_VERSION, "token": token_for(gpu, cc), "gpu": gpu, "cc": cc or None,
               "rigor": RIGOR, "ceilings": {}}
    ceilings = dict(doc["ceilings"])
    for name, (value, source) in sorted(peaks.items()):
        ceilings.setdefault(name, {"value": value, "source": source})
    return {**doc, "ceilings": dict(sorted(ceilings.items()))}


def write(campaign_dir: Path, doc: dict[str, Any]) -> None:
    """Write the campaign's from-capture ceilings (temp file and rename)."""
    write_json_atomic(path_of(campaign_dir), doc)


def hardware_block(doc: dict[str, Any]) -> dict[str, Any]:
    """The ceilings hardware block of a from-capture GPU: its peaks stand where datasheet peaks stand (each
    source says they are ncu's), with no measured ceilings and no device_names (the import checks the GPU)."""
    cc = f", CC {doc['cc']}" if doc["cc"] else ""
    return {"description": f"{doc['gpu']}{cc}: ncu's own device peaks of the captures (hardware: from-capture; "
                           f"{doc['rigor']}, below a datasheet or measured ceiling)",
            "datasheet": {name: dict(entry) for name, entry in doc["ceilings"].items()}}
