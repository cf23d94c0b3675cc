"""Per-metric CSV files of one run (the NERSC roofline recipe) -> one Capture, launches matched by ID.

NERSC's recipe (gitlab.com/NERSC/roofline-on-nvidia-gpus) runs ncu once per metric, `ncu --csv --metrics M app >
M.csv`, so one run's counters arrive as several long-format files of the same launches (same IDs, kernel names,
grid, block, device), each holding one metric in the section "Command line profiler metrics". Each file alone is
a source with almost nothing (cycles without a clock, FLOPs without bytes); merged they are one source. Values are
never averaged: a metric that two files give must agree within the printed precision, else the merge is refused.
The merged source is known by all its files: its id joins their ids in sorted order, its SHA-256 is that of the
`sha256sum`-style listing of the files' hashes (`<sha256>  <id>` lines, sorted by id), and `parts` lists each.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from perfreport.errors import InputError, PerfReportError
from perfreport.ncu.csv.common import LONG_COLUMNS, RULE_COLUMNS, load_table
from perfreport.ncu.csv.details import COMMAND_LINE_SECTION
from perfreport.ncu.model import Capture, KernelLaunch

PART_SEPARATOR = " + "  # between the file ids in a merged source's id
SIBLING_MAX_BYTES = 32 << 20  # a folder's other files are looked at only up to this size (per-metric files are small)
_SAME = (("name", "kernel name"), ("grid_size", "grid"), ("block_size", "block"), ("device", "device"), ("cc", "CC"))
FIX_RUNS = (
    "Per-metric files merge only when they come from runs of the same launches (same application, kernel filter, "
    "--launch-skip and --launch-count). Re-run the odd metric with the others' options, or profile every metric "
    "in one run (`ncu --csv --metrics M1,M2,... APP > all.csv`); files of different runs are imported in separate "
    "import_ncu calls (in a bundle: each run's files in a folder of their own under ncu-profiles/)."
)


@dataclass(frozen=True)
class PerMetric:
    """What a file `ncu --csv --metrics M` wrote holds: its one metric and its launches as (ID, kernel name)."""

    metric: str
    launches: tuple[tuple[str, str], ...]


def per_metric(path: Path, capture: Capture) -> PerMetric | None:
    """The metric and launches of a one-metric file (the NERSC recipe's form); None for any other export.

    The Capture decides cheaply (a long page whose only section is the command-line metrics', one metric kept);
    the file's own rows decide the rest, as the Capture holds only the metrics derivation reads.
    """
    if capture.source_format != "csv-details" or capture.sections != [COMMAND_LINE_SECTION]:
        return None
    if len({key for launch in capture.launches for key in (*launch.metrics, *launch.text)}) > 1:
        return None
    return scan_per_metric(path)


def scan_per_metric(path: Path) -> PerMetric | None:
    """Read a file's rows: its metric and launches if it holds one metric of `--metrics` rows only, else None."""
    try:
        table = load_table(path)
    except PerfReportError:
        return None
    header = table.header
    if any(c not in header for c in LONG_COLUMNS) or "ID" not in table.fixed:
        return None
    section, metric = header.index("Section Name"), header.index("Metric Name")
    rule = header.index(RULE_COLUMNS[0]) if RULE_COLUMNS[0] in header else None
    name_at, id_at = table.fixed["Kernel Name"], table.fixed["ID"]
    metrics: set[str] = set()
    launches: dict[str, str] = {}
    try:
        for row in table.rows:
            if len(row) <= metric or row[section] != COMMAND_LINE_SECTION or (rule is not None and rule < len(row)
                                                                              and row[rule]):
                return None
            if row[metric].strip():
                metrics.add(row[metric].strip())
            launches.setdefault(row[id_at], row[name_at])
    except PerfReportError:
        return None
    if len(metrics) != 1 or not launches:
        return None
    return PerMetric(metrics.pop(), tuple(launches.items()))


def merge_per_metric(parts: list[tuple[str, Capture]]) -> Capture:
    """One Capture of the per-metric files of one run, given as (file id, Capture); refused unless they match.

    Every file must hold the same launch IDs, each with the same kernel name (and grid, block, device, CC where both
    files give one); a metric that two files give must agree within both files' printed precision (the finer
    value is kept). Launch fields a run may change (process id, host, context, stream) come from the first file.
    """
    parts = sorted(parts, key=lambda p: p[0])
    first_id, first = parts[0]
    merged = {k.launch_id: _copy(k) for k in first.launches}
    origin = {(k.launch_id, key): first_id for k in first.launches for key in (*k.metrics, *k.text)}
    warnings = [f"{first_id}: {w}" for w in first.warnings]
    for part_id, capture in parts[1:]:
        _check_ids(first_id, merged, part_id, capture)
        for launch in capture.launches:
            base = merged[launch.launch_id]
            _check_launch(first_id, base, part_id, launch)
            _merge_values(base, launch, part_id, origin)
        warnings.extend(f"{part_id}: {w}" for w in capture.warnings)
    sections = list(dict.fromkeys(s for _, c in parts for s in c.sections))
    return Capture(
        source_path=PART_SEPARATOR.join(i for i, _ in parts), source_format="csv-details",
        sha256=merged_sha256([(i, c.sha256) for i, c in parts]),
        ncu_version=next((c.ncu_version for _, c in parts if c.ncu_version), None),
        gpu=next((c.gpu for _, c in parts if c.gpu), None), section_set=None, sections=sections,
        launches=[merged[k.launch_id] for k in first.launches], warnings=warnings,
    )


def merged_id(part_ids: list[str]) -> str:
    """The source id of merged files: their ids, sorted, joined (the same files give the same id)."""
    return PART_SEPARATOR.join(sorted(part_ids))


def merged_sha256(parts: list[tuple[str, str]]) -> str:
    """SHA-256 of the `sha256sum`-style listing (`<sha256>  <id>`, sorted by id) of the (id, sha256) parts."""
    listing = "".join(f"{sha}  {part}\n" for part, sha in sorted(parts))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def parts_record(parts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The `parts` of a merged source record: each file's id and SHA-256, sorted by id."""
    return [{"file": part, "sha256": sha} for part, sha in sorted(parts)]


def _copy(launch: KernelLaunch) -> KernelLaunch:
    return replace(launch, metrics=dict(launch.metrics), units=dict(launch.units), text=dict(launch.text),
                   rules=list(launch.rules), precision=dict(launch.precision))


def _check_ids(first_id: str, merged: dict[int, KernelLaunch], part_id: str, capture: Capture) -> None:
    ids = {k.launch_id: k for k in capture.launches}
    missing, extra = sorted(merged.keys() - ids.keys()), sorted(ids.keys() - merged.keys())
    if missing:
        raise InputError(
            f"'{part_id}': has no launch ID {missing[0]}, which '{first_id}' holds ({merged[missing[0]].name}); "
            f"expected the same launch IDs in every per-metric file of one run, got {len(ids)} launch(es) here and "
            f"{len(merged)} there ({len(missing)} missing). {FIX_RUNS}")
    if extra:
        raise InputError(
            f"'{part_id}': holds launch ID {extra[0]} ({ids[extra[0]].name}), which '{first_id}' does not; "
            f"expected the same launch IDs in every per-metric file of one run, got {len(ids)} launch(es) here and "
            f"{len(merged)} there ({len(extra)} extra). {FIX_RUNS}")


def _check_launch(first_id: str, base: KernelLaunch, part_id: str, launch: KernelLaunch) -> None:
    for attr, label in _SAME:
        mine, theirs = getattr(launch, attr), getattr(base, attr)
        if mine and theirs and mine != theirs:
            raise InputError(
                f"'{part_id}': launch ID {launch.launch_id} has {label} {mine!r} there but {theirs!r} in "
                f"'{first_id}'; expected the same launch under one ID in every per-metric file. {FIX_RUNS}")


def _merge_values(base: KernelLaunch, launch: KernelLaunch, part_id: str, origin: dict[tuple[int, str], str]) -> None:
    for key, value in launch.metrics.items():
        tol = launch.precision.get(key, 0.0)
        if key not in base.metrics:
            base.metrics[key], base.precision[key] = value, tol
            base.units.setdefault(key, launch.units.get(key, ""))
            origin[(launch.launch_id, key)] = part_id
            continue
        old, old_tol = base.metrics[key], base.precision.get(key, 0.0)
        if abs(old - value) > old_tol + tol + 1e-9 * max(abs(old), abs(value)):
            _conflict(launch, key, f"{value:,} {launch.units.get(key, '')}".strip(), part_id,
                      f"{old:,} {base.units.get(key, '')}".strip(), origin[(launch.launch_id, key)])
        if tol < old_tol:
            base.metrics[key], base.precision[key] = value, tol
    for key, text in launch.text.items():
        if key in base.text and base.text[key] != text:
            _conflict(launch, key, repr(text), part_id, repr(base.text[key]), origin[(launch.launch_id, key)])
        if key not in base.text:
            base.text[key] = text
            base.units.setdefault(key, launch.units.get(key, ""))
            origin[(launch.launch_id, key)] = part_id


def _conflict(launch: KernelLaunch, key: str, mine: str, part_id: str, theirs: str, other_id: str) -> None:
    raise InputError(
        f"'{part_id}': launch ID {launch.launch_id} ({launch.name}): {key} is {mine} there but {theirs} in "
        f"'{other_id}'; a metric that two per-metric files give must agree (values are never averaged). Keep the "
        f"file of the run you trust and remove the other from the import, or profile every metric in one run "
        f"(`ncu --csv --metrics M1,M2,... APP > all.csv`).")


def siblings(path: Path, found: PerMetric) -> list[tuple[Path, str]]:
    """The other one-metric files of the same launches in path's folder, as (path, metric), sorted by name."""
    from perfreport.ncu.read import CSV_SUFFIXES

    out: list[tuple[Path, str]] = []
    try:
        entries = sorted(path.parent.iterdir(), key=lambda p: p.name)
    except OSError:
        return out
    for other in entries:
        try:
            small = other.is_file() and other.stat().st_size <= SIBLING_MAX_BYTES
        except OSError:
            continue
        if other.name == path.name or other.name.startswith(".") or not small or \
                not other.name.lower().endswith(CSV_SUFFIXES):
            continue
        pm = scan_per_metric(other)
        if pm is not None and pm.launches == found.launches:
            out.append((path.parent / other.name, pm.metric))
    return out


def lone_file_error(path: Path, found: PerMetric, others: list[tuple[Path, str]], campaign_dir: Path,
                    cell_id: str) -> InputError:
    """The refusal of one per-metric file imported without the others of its run, with the commands that join them."""
    files = sorted([(path, found.metric), *others], key=lambda p: p[0].name)
    bundles = " ".join(f"--bundle {shlex.quote(str(p))}" for p, _ in files)
    metrics = ",".join(dict.fromkeys(m for _, m in files))
    shown = ", ".join(p.name for p, _ in others[:8]) + (" ..." if len(others) > 8 else "")
    return InputError(
        f"'{path}': holds one metric only ({found.metric}, {len(found.launches)} launch(es)), as `ncu --csv "
        f"--metrics {found.metric}` writes it, and its folder holds {len(others)} more such file(s) of the same "
        f"launches ({shown}): the per-metric files of one run (the NERSC roofline recipe). Imported one at a "
        f"time each would be a source with almost nothing; expected them together. Import them as one source, "
        f"merged by launch ID:\n"
        f"  perftunereport import_ncu --campaign {shlex.quote(str(campaign_dir))} --cell-id "
        f"{shlex.quote(cell_id)} {bundles}\n"
        f"or profile every metric in one run and import that file:\n"
        f"  ncu --csv --metrics {metrics} APP > all.csv\n"
        f"Nothing was written.")


def lone_file_warning(path: Path, found: PerMetric) -> str:
    """The note on a one-metric file imported alone (no others of its launches beside it)."""
    return (f"holds one metric only ({found.metric}), as `ncu --csv --metrics {found.metric}` writes it; if it is "
            f"one of the per-metric files of a run (the NERSC roofline recipe), import them together (repeat "
            f"--bundle, or put them in a bundle's ncu-profiles/): they merge into one source by launch ID.")


def missing_siblings_warning(given: list[Path], others: list[tuple[Path, str]]) -> str:
    """The note on per-metric files merged while their folder holds more of the same launches."""
    shown = ", ".join(p.name for p, _ in others[:8]) + (" ..." if len(others) > 8 else "")
    return (f"merged {len(given)} per-metric files, but their folder holds {len(others)} more of the same "
            f"launches that were not given ({shown}); pass them too (another --bundle each) to import them "
            f"into this source.")
