"""Test-only oracle: rocprof-compute's own analysis-config expressions, evaluated on a workload's pmc_perf.csv.

The panels under tests/data/rocprof/analysis_configs/<gfx>/ are rocprof-compute's YAML as shipped (MIT, AMD). This
evaluates their `value`/`avg` expressions the way its parser (src/utils/parser.py) does: counters are columns of the
kernel's dispatches, `$name` a sysinfo.csv value, `$denom` the normalization (per_kernel: 1, per_second: the
dispatch's seconds), AVG the mean over dispatches (NaN skipped, as pandas does), `x if c else None` an element-wise
where; a missing counter gives NaN. Nothing here imports perfreport.rocprof: it is the independent side.
"""

from __future__ import annotations

import ast
import csv
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

CONFIGS = Path(__file__).parent / "data" / "rocprof" / "analysis_configs"
DENOM = {"per_kernel": "1", "per_second": "((End_Timestamp - Start_Timestamp) / 1000000000)"}  # parser.py's
BUILTIN = {"GRBM_GUI_ACTIVE_PER_XCD": "(GRBM_GUI_ACTIVE / $num_xcd)"}  # parser.py's build_in_vars used here


def metrics(arch: str) -> dict[str, dict[str, Any]]:
    """'<panel id> <table title> / <metric>' -> that metric's fields (value, avg, peak, pop, ...)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((CONFIGS / arch).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            panel = (doc or {}).get("Panel Config")
            if not panel:
                continue
            for source in panel["data source"]:
                for table in source.values():
                    for name, fields in (table.get("metric") or {}).items():
                        if isinstance(fields, dict):
                            out[f"{panel['id']:04d} {table.get('title')} / {name}"] = fields
    return out


class _Where(ast.NodeTransformer):
    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:  # parser.py: body.where(test, orelse)
        self.generic_visit(node)
        return ast.Call(ast.Name("_where", ast.Load()), [node.test, node.body, node.orelse], [])


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def evaluate(expr: Any, rows: list[dict[str, str]], sysinfo: dict[str, str], unit: str = "per_kernel") -> float:
    """One expression over one kernel's dispatch rows: a float, NaN where rocprof-compute shows nothing."""
    if expr is None or (isinstance(expr, str) and expr.strip() in ("", "None")):
        return math.nan
    s = str(expr)
    for name, text in BUILTIN.items():
        s = s.replace(f"${name}", text)
    s = re.sub(r"\$(?=[A-Za-z_])", "sys__", s.replace("$denom", DENOM[unit]))
    tree = ast.fix_missing_locations(_Where().visit(ast.parse(s, mode="eval")))
    columns = rows[0].keys()

    def lookup(name: str) -> Any:
        if name.startswith("sys__"):
            return _num(sysinfo.get(name[5:], "nan"))
        if name in columns:
            return np.array([_num(r[name]) for r in rows], dtype=float)
        return np.full(len(rows), math.nan)

    ns: dict[str, Any] = {
        "AVG": lambda a: float(np.nanmean(a)) if np.size(a) and not np.isnan(a).all() else math.nan,
        "MIN": lambda *a: float(np.nanmin(a[0])) if len(a) == 1 else min(a),
        "MAX": lambda *a: np.maximum(a[0], a[1]) if len(a) == 2 else float(np.nanmax(a[0])),
        "TO_INT": lambda a: a if np.ndim(a) else (math.nan if math.isnan(a) else int(a)),
        "ROUND": lambda a, b: np.round(a, b), "None": math.nan,
        "_where": lambda test, body, orelse: np.where(test, body, math.nan if orelse is None else orelse),
    }
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(ns)
    ns.update({n: lookup(n) for n in names})
    with np.errstate(divide="ignore", invalid="ignore"):
        value = eval(compile(ast.Expression(tree.body), "<rocprof-compute>", "eval"), {"__builtins__": {}}, ns)
    return float(np.nanmean(value)) if np.ndim(value) else float(value)


def read_workload(folder: Path) -> tuple[dict[str, str], dict[str, list[dict[str, str]]]]:
    """sysinfo and the dispatch rows of each kernel (by Kernel_Name), read with the csv module only."""
    with (folder / "sysinfo.csv").open(newline="") as fh:
        sysinfo = next(csv.DictReader(fh))
    kernels: dict[str, list[dict[str, str]]] = {}
    with (folder / "pmc_perf.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            kernels.setdefault(row["Kernel_Name"], []).append(row)
    return sysinfo, kernels
