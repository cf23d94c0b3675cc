"""Group launches of one kernel (same name, grid and block, same work) and summarize them: n, mean, std, min, max."""

from __future__ import annotations

import math
from typing import Any

from perfreport.config.ceilings import classify_family
from perfreport.kernels.aggregate import combine, launch_stats
from perfreport.ncu.catalog.chips import tensor_paths, unmapped_message
from perfreport.ncu.derive import DeriveContext, derive_launch, device_name, settle
from perfreport.ncu.model import Capture, KernelLaunch, rule_row

VENDOR = "nvidia"  # every ncu row's vendor
AMD_ONLY = ("lds_bytes", "ai_lds", "pass_mixed", "pct_of_achievable_ci")  # kernel-row fields ncu has nothing for


def kernel_key(launch: KernelLaunch) -> tuple[str, str, str]:
    """Launches of one kernel: same demangled name and launch configuration."""
    return (launch.name, launch.grid_size, launch.block_size)


# Launches of one (name, grid, block) are one row only when they did the same piece of work: a persistent GEMM
# launches the same grid for every shape, so its o-proj and w2 launches would otherwise share a meaningless mean.
# Same work: FLOPs and DRAM bytes within WORK_TOLERANCE of each other (counters repeat for one shape; DRAM bytes
# vary with cache state) and durations within DURATION_TOLERANCE (the measure a basic capture has).
WORK_TOLERANCE = {"flops_total": 1.1, "dram_bytes": 1.25, "duration_ns": 1.5}


def _work(row: dict[str, Any]) -> dict[str, float | None]:
    flops = row.get("flops") or {}
    return {"flops_total": flops.get("total"), "dram_bytes": row.get("dram_bytes"),
            "duration_ns": row.get("duration_ns")}


_Range = dict[str, tuple[float, float]]  # measure -> (lowest, highest) value of a group's launches


def _widened(span: _Range, work: dict[str, float | None]) -> _Range | None:
    """The group's ranges with `work` in them, or None when that puts a measure past its tolerance (max/min;
    unmeasured values skip). Running ranges: a launch is checked in O(1), not against every launch of its group."""
    out = dict(span)
    for measure, tolerance in WORK_TOLERANCE.items():
        v = work[measure]
        if v is None:
            continue
        lo, hi = out.get(measure, (v, v))
        lo, hi = min(lo, v), max(hi, v)
        if lo <= 0 < hi or (lo > 0 and hi / lo > tolerance):
            return None
        out[measure] = (lo, hi)
    return out


def split_by_work(rows: list[dict[str, Any]]) -> list[list[int]]:
    """Indexes of rows (launch order) grouped by the work they did: each row joins the first group it fits."""
    groups: list[list[int]] = []
    spans: list[_Range] = []
    for i, row in enumerate(rows):
        work = _work(row)
        for g, span in enumerate(spans):
            widened = _widened(span, work)
            if widened is not None:
                groups[g].append(i)
                spans[g] = widened
                break
        else:
            groups.append([i])
            spans.append(_widened({}, work) or {})
    return groups


def summarize_capture(capture: Capture, ctx: DeriveContext, source_id: str) -> list[dict[str, Any]]:
    """Derive every launch, then one entry per kernel and piece of work, in first-launch order.

    A (name, grid, block) whose launches did different work gives one entry per piece of work, numbered
    `instance` 1, 2, .. by first launch; one that did the same work throughout gives one entry with instance null.
    """
    has_rules = any(k.rules for k in capture.launches)  # a raw-page export holds none: its rows get null
    groups: dict[tuple[str, str, str], list[KernelLaunch]] = {}
    problems: set[str] = set()
    for launch in sorted(capture.launches, key=lambda k: k.launch_id):
        groups.setdefault(kernel_key(launch), []).append(launch)
    entries = []
    for launches in groups.values():
        family = classify_family(launches[0].name, ctx.ceilings)  # one name per group
        said: list[str] = []
        rows = [derive_launch(k, ctx, family, said) for k in launches]
        empty = [k.launch_id for k in launches if not any(not math.isnan(v) for m, v in k.metrics.items()
                                                          if not m.endswith(".peak_sustained"))]
        if empty:  # ncu profiled nothing for these launches (a replay that failed): every counter NaN
            problems.add(f"kernel {row_label(launches[0])}: launch(es) {', '.join(map(str, empty))} hold no value "
                         f"(every counter NaN: ncu's profile of the launch is empty); their rows are null. "
                         f"Re-capture that kernel (`--kernel-name` and `--launch-skip` to reach it)")
        problems.update(f"kernel {row_label(launches[0])}: {p}" for p in said)
        for row in rows:
            problems.update(f"kernel {row_label(launches[0])} (launch {row['launch_id']}): {p}; a value no GPU "
                            f"produces (a unit slip or a corrupt export): --strict refuses it"
                            for p in row["implausible"] or [])
        parts = split_by_work(rows)
        for n, part in enumerate(parts, 1):
            entry = _entry([launches[i] for i in part], [rows[i] for i in part], source_id)
            entry["instance"] = n if len(parts) > 1 else None
            first = launches[part[0]]
            entry["rules"] = [rule_row(r, first.launch_id) for r in first.rules] if has_rules else None
            entries.append(entry)
    _warn_unmapped(capture, entries)
    _warn_no_tensor_counters(capture, entries)
    capture.warnings.extend(sorted(problems))
    _warn_exceeded(capture, entries)
    return sorted(entries, key=lambda e: e["launch_ids"][0])


def row_label(launch: KernelLaunch) -> str:
    """A kernel as warnings name it: its name, shortened, and its launch configuration."""
    name = launch.name if len(launch.name) <= 80 else launch.name[:77] + "..."
    return f"{name!r} grid {launch.grid_size} block {launch.block_size}"


def _warn_exceeded(capture: Capture, entries: list[dict[str, Any]]) -> None:
    """One warning per ceiling some kernel ran above: the ceiling, not the kernel, is wrong (re-measure it)."""
    over: dict[str, list[tuple[float, str]]] = {}
    for e in entries:
        for key, pct in (e.get("ceiling_exceeded") or {}).items():
            over.setdefault(key, []).append((pct, e["name"]))
    for key, hits in sorted(over.items()):
        pct, name = max(hits)
        capture.warnings.append(
            f"{len(hits)} kernel(s) ran above 100% of ceiling {key} (up to {pct:.1f}%, {name[:60]!r}): the ceiling "
            f"is below what the GPU does, so that % is not shown; re-measure it (`perftunereport ceilings measure`) "
            f"or fix it in the ceilings file")


def _warn_unmapped(capture: Capture, entries: list[dict[str, Any]]) -> None:
    """One warning per export whose GPU has no verified tensor-path map: its tensor FLOPs were left null."""
    ids = {i for e in entries if e["chip"] is None for i in e["launch_ids"]}
    launches = [k for k in capture.launches if k.launch_id in ids]
    if launches:
        first = launches[0]
        metrics = {m for k in launches for m in k.metrics}
        capture.warnings.append(unmapped_message(device_name(first), first.cc or None, None, metrics))


def _warn_no_tensor_counters(capture: Capture, entries: list[dict[str, Any]]) -> None:
    """One warning per export of a chip with tensor cores whose FLOP counters lack every tensor-path one (ncu's
    roofline sections of 2021-2024, the NERSC recipe): tensor FLOPs null, not 0; AI and TFLOP/s lower bounds."""
    hit = [e for e in entries if e["chip"] and "tensor" in (e["flops_uncounted"] or [])]
    if hit:
        chip = hit[0]["chip"]
        names = sorted(p.flops for p in tensor_paths(chip).values())
        capture.warnings.append(
            f"{len(hit)} kernel(s) on {chip}: the export has CUDA-core FLOP counters but none of the chip's "
            f"tensor-path ones ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): tensor FLOPs left null, "
            f"not 0; their AI and TFLOP/s sum the counted parts, a lower bound (flops_uncounted), and a lower bound "
            f"left of the ridge picks no roof. Capture with `--metrics` naming the tensor-path counters (ncu 2025 "
            f"`--set full` keeps them) to measure them")


def _entry(launches: list[KernelLaunch], rows: list[dict[str, Any]], source_id: str) -> dict[str, Any]:
    first = launches[0]
    entry: dict[str, Any] = {
        "name": first.name,
        "function": first.function,
        "mangled": first.mangled,
        "grid_size": first.grid_size,
        "block_size": first.block_size,
        "source": source_id,
        "launches": len(rows),
        "launch_ids": [r["launch_id"] for r in rows],
        "vendor": VENDOR,
        **dict.fromkeys(AMD_ONLY),
    }
    entry.update(combine(rows))
    entry["ai_measured"] = entry["arithmetic_intensity"] is not None
    settle(entry, rows)
    entry["stats"] = launch_stats(rows)
    entry["per_launch"] = rows if len(rows) > 1 else []
    return entry
