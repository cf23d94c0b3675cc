"""One kernel row from its launches, by each field's `agg` in the row table: the rule both importers follow.

A mean is over every launch or none (a partial mean would mislead); a mapping is averaged key by key (a text value,
such as ncu_peaks.compute_path, is the first launch's); `stats` spreads each averaged field over its launches.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from perfreport.kernels.row import agg_names

STAT_FIELDS = agg_names("mean")  # numbers averaged over launches, with stats (per launch in `per_launch`)
CONSTANT_FIELDS = agg_names("first")  # must agree across a kernel's launches: the first launch's
DICT_FIELDS = agg_names("dicts")  # mappings averaged key by key


def mean(values: list[Any]) -> float | None:
    """Mean over launches, or None if any launch lacks the value."""
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(values)


def mean_lists(lists: list[list[float] | None]) -> list[float | None] | None:
    """Element-wise mean of equal-length lists (a CI per launch), or None if any launch lacks one."""
    if not lists or any(x is None for x in lists):
        return None
    return [mean([x[i] for x in lists if x]) for i in range(len(lists[0] or []))]


def mean_dicts(dicts: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Key-wise mean of mappings (numbers averaged, lists element-wise, nested mappings in turn, anything else the
    first launch's), or None if any launch lacks the mapping."""
    if not dicts or any(d is None for d in dicts):
        return None
    out: dict[str, Any] = {}
    for k in sorted({k for d in dicts if d for k in d}):
        vals = [d.get(k) if d else None for d in dicts]
        if all(isinstance(v, int | float) or v is None for v in vals):
            out[k] = mean(vals)
        elif all(isinstance(v, list) for v in vals):
            out[k] = mean_lists(vals)
        elif all(isinstance(v, dict) for v in vals):
            out[k] = mean_dicts(vals)
        else:
            out[k] = vals[0]
    return out


def stats(values: list[float | None]) -> dict[str, Any] | None:
    """n, mean, std, min and max of the launches that have the value (None when none has)."""
    got = [v for v in values if v is not None]
    if not got:
        return None
    low, high = min(got), max(got)
    return {
        "n": len(got),
        "mean": statistics.fmean(got),
        # stdev is exact (fractions) and slow; equal finite values give exactly 0.0 without it
        "std": statistics.stdev(got) if len(got) > 1 and not (low == high and math.isfinite(low)) else 0.0,
        "min": low,
        "max": high,
    }


def combine(launches: list[dict[str, Any]]) -> dict[str, Any]:
    """The launch-level fields of one kernel row: first, mean or key-wise mean over its launches."""
    out: dict[str, Any] = {f: launches[0][f] for f in CONSTANT_FIELDS}
    out.update({f: mean([r[f] for r in launches]) for f in STAT_FIELDS})
    out.update({f: mean_dicts([r[f] for r in launches]) for f in DICT_FIELDS})
    return out


def launch_stats(launches: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The row's `stats`: each averaged field's spread over its launches (fields no launch has left out)."""
    return {f: s for f in STAT_FIELDS if (s := stats([r[f] for r in launches])) is not None}
