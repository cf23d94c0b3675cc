"""What each catalog metric measures (metrics.yaml `dimensions`), and the checks every reader applies to it.

A value enters derivation only in a unit of its metric's dimension and as a finite number >= 0: a duration in
cycles taken as ns, bytes in an unknown unit, an ``inf`` or a negative count would give a derived number that is
silently wrong. The readers call `unit_problem` / `value_problem` and raise with the file and line they know.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from perfreport.ncu.catalog.metrics import load_catalog, metrics_yaml


@dataclass(frozen=True)
class Dimension:
    """One dimension: its name, the base units that express it, and the spellings a message suggests."""

    name: str
    base: frozenset[str]
    printed: str


@lru_cache(maxsize=1)
def metric_dimensions() -> dict[str, Dimension]:
    """Raw metric name -> its dimension, for every numeric metric derivation reads (by its rep_units unit)."""
    dims = [Dimension(str(name), frozenset(str(u) for u in spec["base"]), str(spec["printed"]))
            for name, spec in metrics_yaml()["dimensions"].items()]
    by_unit = {u: d for d in dims for u in d.base}
    out: dict[str, Dimension] = {}
    for metric, unit in load_catalog().rep_units.items():
        if unit not in by_unit:
            raise AssertionError(f"metrics.yaml: rep_units {metric}: {unit!r} is in no `dimensions` entry")
        out[metric] = by_unit[unit]
    return out


def unit_problem(metric: str, printed: str, base: str | None) -> str | None:
    """Why `metric` cannot take a value printed in unit `printed` (base unit `base`); None when it can.

    `base` None: the unit is unknown (no conversion exists), which fits no dimension.
    """
    dim = metric_dimensions().get(metric)
    if dim is None or (base is not None and base in dim.base):
        return None
    what = "an unknown unit" if base is None else f"a unit that is not a {dim.name.replace('_', ' ')}"
    return (f"metric {metric!r} has unit {printed!r}, {what}; expected {dim.printed}. The value cannot be "
            f"converted and would make every number derived from it wrong: export with the units ncu prints "
            f"(`ncu --import R.ncu-rep --csv --page raw`) or correct the unit")


def value_problem(metric: str, value: float, printed: str | None = None) -> str | None:
    """Why `value` (in base units) cannot be `metric`'s value: not finite, or negative; None when it can. A reader
    passes the cell as `printed` (value and its unit, '-5 msecond'): the message shows the file's own words."""
    if 0.0 <= value < math.inf or metric not in metric_dimensions():
        return None
    what = "not a finite number" if not math.isfinite(value) else "negative"
    shown = f"the cell holds {printed!r}" if printed is not None else repr(value)
    return (f"metric {metric!r} is {what} ({shown}); expected a finite number >= 0 (ncu prints no other for "
            f"this metric). The export was damaged or edited; export it again")
