"""The policy rules that need the bundle: `--after-basic` says a basic capture of the same kernel came first, and
the bundle's receipts (ncu-profiles/*.receipt.json, written by `capture run` and `capture k8s run`) must show it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfreport.bundle import CAPTURE_FILES, PROFILES_DIR
from perfreport.capture.plan.policy import HEAVY_SETS, Finding
from perfreport.capture.plan.spec import CaptureSpec
from perfreport.errors import InputError


def after_basic_findings(spec: CaptureSpec, bundle_dir: Path) -> list[Finding]:
    """A refusal for each kernel pattern --after-basic claims a basic capture of that the bundle has no receipt of."""
    if not spec.after_basic or spec.section_set not in HEAVY_SETS:
        return []
    profiles = Path(bundle_dir) / PROFILES_DIR
    receipts, unreadable = _receipts(profiles)
    basic = [r for r in receipts if r.get("mode") != "cleanup" and r.get("section_set") == "basic"
             and (r.get("kernels_profiled") or 0) >= 1]
    out = []
    for pattern in spec.kernel_patterns or (None,):
        if any(_covers(r, pattern, spec.kernel_name_base) for r in basic):
            continue
        scope = f"--kernel-name {pattern}" if pattern else "this scope (no --kernel-name)"
        seen = sorted({p for r in basic for p in r.get("kernel_patterns") or []})
        found = (f"it holds {len(receipts)} receipt(s), basic ones with a profiled kernel for "
                 f"{', '.join(seen) if seen else 'no pattern'}" if receipts else "it holds no capture receipt")
        skipped = f"; {unreadable} receipt(s) could not be read" if unreadable else ""
        rerun = f" --kernel-name {pattern}" if pattern else ""
        out.append(Finding("after-basic-unproven", "refuse", (
            f"--after-basic says a basic capture of {scope} came first, but the bundle's {profiles} has no receipt "
            f"of one ({found}{skipped}; expected a *{CAPTURE_FILES['receipt']} with section_set basic, "
            f"kernel_patterns holding {pattern or 'none'}, kernel_name_base {spec.kernel_name_base} and at least one "
            f"kernel profiled). Capture it first into this bundle (`perftunereport capture run --bundle "
            f"{bundle_dir} --set basic{rerun} ...`), check that it profiled the kernel, then run this capture "
            f"again with --after-basic.")))
    return out


def _covers(receipt: dict[str, Any], pattern: str | None, base: str) -> bool:
    """A basic receipt of the same kernel: the pattern among its kernel_patterns (none for an NVTX-only scope)."""
    patterns = receipt.get("kernel_patterns") or []
    if receipt.get("kernel_name_base", "function") != base or not isinstance(patterns, list):
        return False
    return pattern in patterns if pattern is not None else not patterns


def _receipts(profiles: Path) -> tuple[list[dict[str, Any]], int]:
    """Every readable receipt in ncu-profiles/, and how many could not be read (damaged ones prove nothing)."""
    from perfreport.bundle.receipt import load_receipt

    if not profiles.is_dir():
        return [], 0
    out, bad = [], 0
    for path in sorted(profiles.glob(f"*{CAPTURE_FILES['receipt']}")):
        try:
            out.append(load_receipt(path))
        except InputError:
            bad += 1
    return out, bad
