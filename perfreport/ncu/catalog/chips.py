"""Per-chip tensor-path maps (chips.yaml) and ncu's metric catalog of each chip (chips/*.csv.gz).

Tensor FLOPs are a sum over disjoint `sm__ops_path_tensor_*` counters, and which counters exist and which are
breakdowns of others differs by chip (docs/metrics.md "Tensor paths per chip"). An export picks its map from the
device fields it carries (`chip_for`); a chip without a verified map gets no map, never another chip's names.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from perfreport.config.validate import show
from perfreport.errors import ConfigError, InputError
from perfreport.yamlio import SAFE_LOADER

SOURCE = "perfreport/ncu/catalog/chips.yaml"
TENSOR_PREFIX = "sm__ops_path_tensor_"
_NAME = re.compile(r"[a-z][a-z0-9]*")
_CC = re.compile(r"\d+\.\d+")
_METRIC = re.compile(r"[a-z][a-z0-9_]*__[a-z0-9_]+")


@dataclass(frozen=True)
class TensorPath:
    """One tensor path: the `.sum` counter added into tensor FLOPs and its dense per-cycle peak."""

    key: str
    flops: str
    peak: str
    integer: bool  # integer ops (int8): kept per path, not FLOPs


@dataclass(frozen=True)
class Excluded:
    """An aggregate the map does not add: the paths that split it (`covered_by`), or why not."""

    metric: str
    covered_by: tuple[str, ...]
    reason: str | None


@dataclass(frozen=True)
class ChipMap:
    """One chip's map: its catalogs, how an export is recognized, and its tensor paths."""

    key: str
    name: str
    gpus: tuple[str, ...]
    catalogs: tuple[str, ...]  # ncu chip names whose catalogs this map is checked against (first: the key)
    cc: tuple[str, ...]
    chip_ids: tuple[int, ...]
    device_names: tuple[re.Pattern[str], ...]  # empty: any device of these CCs
    paths: Mapping[str, TensorPath]  # empty exactly where tensor_cores is False
    excluded: tuple[Excluded, ...]
    inferred_disjoint: tuple[tuple[str, str], ...]
    # False: no tensor cores and no tensor-path counter (TU116, TU117); `paths` is then empty, and an empty map
    # means exactly this, never "no map"
    tensor_cores: bool

    def accepts_name(self, device_name: str | None) -> bool:
        """Whether a device of this map's CC with this display name is this chip.

        Matched as sol-ceilings.yaml matches its device_names: stripped, runs of whitespace made one, any case
        (drivers print `GTX 1660 SUPER`, `NVIDIA GeForce ...` or the name without the `NVIDIA ` prefix).
        """
        if not self.device_names:
            return True
        name = " ".join((device_name or "").split())
        return bool(name) and any(p.fullmatch(name) for p in self.device_names)


@dataclass(frozen=True)
class ChipMaps:
    """chips.yaml: the ncu version whose catalogs the maps were decided from, and the maps by chip key."""

    ncu_version: str
    chips: Mapping[str, ChipMap]


@lru_cache(maxsize=1)
def load_chip_maps() -> ChipMaps:
    """Parse and validate the packaged chips.yaml once."""
    text = resources.files("perfreport.ncu.catalog").joinpath("chips.yaml").read_text(encoding="utf-8")
    return parse_chip_maps(yaml.load(text, Loader=SAFE_LOADER), SOURCE)


def parse_chip_maps(raw: Any, source: str) -> ChipMaps:
    """Validate a parsed chips.yaml as a whole; one ConfigError lists every problem with its key path."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigError(source, [f"(top level): expected a mapping, got {show(raw)}"])
    _keys(raw, "", {"schema_version", "ncu_version", "chips"}, {"schema_version", "ncu_version", "chips"}, problems)
    if raw.get("schema_version", 1) != 1:
        problems.append(f"schema_version: expected 1, got {show(raw.get('schema_version'))}")
    version = raw.get("ncu_version")
    if "ncu_version" in raw and not (isinstance(version, str) and version):
        problems.append(f"ncu_version: expected a non-empty string, got {show(version)}")
    chips = raw.get("chips")
    maps: dict[str, ChipMap] = {}
    if not isinstance(chips, dict) or not chips:
        problems.append(f"chips: expected a non-empty mapping of chip key -> map, got {show(chips)}")
    else:
        for key, node in chips.items():
            got = _chip(str(key), node, f"chips.{key}", problems)
            if got is not None:
                maps[str(key)] = got
        problems += _across(maps)
    if problems:
        raise ConfigError(source, problems)
    return ChipMaps(str(version), maps)


def chip_for(device_name: str | None, cc: str | None, chip: str | int | None = None) -> str | None:
    """The chip key of the map for an export's device, or None when no verified map fits it.

    `device_name` is device__attribute_display_name (`NVIDIA H200`), `cc` the CC column (`9.0`), `chip` ncu's chip
    name (`gb100`) or the numeric device__attribute_chip (`384`). A chip name without a map gives None; a number
    not seen in an export is passed over. A known chip whose CC contradicts `cc` gives None.
    """
    maps = load_chip_maps().chips
    cc = cc.strip() if cc else None
    named = _by_chip(maps, chip)
    if named is not None or (isinstance(chip, str) and _NAME.fullmatch(chip.strip().lower())):
        return named if named is not None and (cc is None or cc in maps[named].cc) else None
    if cc is None:
        return None
    hits = [k for k, m in maps.items() if cc in m.cc and m.accepts_name(device_name)]
    return hits[0] if len(hits) == 1 else None


def tensor_paths(chip: str) -> Mapping[str, TensorPath]:
    """The tensor paths of a chip key (`chip_for`'s answer), by path key."""
    return _map(chip).paths


def catalog(chip: str, suffix: bool = False) -> dict[str, str]:
    """ncu's catalog of one chip (`gb102` too): metric -> description; suffix=True: full names with suffixes."""
    return dict(_catalog(chip.lower(), suffix))


def catalog_metrics(chip: str) -> frozenset[str]:
    """Every metric name (no suffixes) in the plain-mode catalog of one chip."""
    return frozenset(name for name, _ in _catalog(chip.lower(), False))


def unmapped_message(device_name: str | None, cc: str | None, chip: str | int | None, metrics: Iterable[str]) -> str:
    """The warning for an export whose chip has no verified map: what it is, the tensor counters it carries."""
    carried = sorted({m for m in metrics if m.startswith(TENSOR_PREFIX)})
    where = ", ".join(p for p in (f"GPU {device_name!r}" if device_name else "", f"CC {cc}" if cc else "",
                                  f"chip {chip}" if chip is not None else "") if p) or "an unnamed GPU"
    tensor = (f"it carries {len(carried)} tensor counter(s): {', '.join(carried)}" if carried
              else "it carries no tensor counter")
    return (f"{where}: no verified tensor-path map in {SOURCE} (maps: {', '.join(load_chip_maps().chips)}); "
            f"tensor FLOPs left null, {tensor}. Summing another chip's names could count ops twice or miss them: "
            f"dump this chip's catalog (`ncu --query-metrics --chip <chip> --csv`, device/ncu_catalogs/dump.sh) "
            f"and add its map")


# -- reading ---------------------------------------------------------------------------------------------------------


def _map(chip: str) -> ChipMap:
    maps = load_chip_maps().chips
    if chip not in maps:
        raise InputError(f"chip {chip!r}: no tensor-path map in {SOURCE}; expected one of {', '.join(maps)} "
                         f"(chip_for() picks it from an export's device fields)")
    return maps[chip]


def _by_chip(maps: Mapping[str, ChipMap], chip: str | int | None) -> str | None:
    if chip is None or isinstance(chip, bool):
        return None
    text = str(chip).strip().lower()
    if text.isdigit():
        return next((k for k, m in maps.items() if int(text) in m.chip_ids), None)
    return next((k for k, m in maps.items() if text in m.catalogs), None)


@lru_cache(maxsize=32)
def _catalog(chip: str, suffix: bool) -> tuple[tuple[str, str], ...]:
    if not _NAME.fullmatch(chip):
        raise InputError(f"chip {chip!r}: expected an ncu chip name such as gh100 (see chips/chips.txt)")
    name = f"metrics_{chip}_suffix.csv.gz" if suffix else f"metrics_{chip}.csv.gz"
    file = resources.files("perfreport.ncu.catalog").joinpath("chips", name)
    if not file.is_file():
        raise InputError(f"chip {chip!r}: no catalog perfreport/ncu/catalog/chips/{name}; committed: the chips "
                         f"of chips/README.md")
    rows = list(csv.reader(io.StringIO(gzip.decompress(file.read_bytes()).decode("utf-8"))))
    head = ["Metric name", "Metric type", "Metric unit", "Metric description", chip]
    if not rows or rows[0] != head:
        raise InputError(f"chips/{name}: expected the header {head}, got {rows[0] if rows else 'an empty file'}")
    return tuple((r[0], r[3].strip()) for r in rows[1:])


# -- validation ------------------------------------------------------------------------------------------------------


def _keys(node: Mapping[Any, Any], at: str, allowed: set[str], required: set[str], problems: list[str]) -> None:
    for k in sorted(required - set(node)):
        problems.append(f"{at}{k}: required field is missing")
    for k in node:
        if k not in allowed:
            problems.append(f"{at}{k}: unknown field, expected one of {', '.join(sorted(allowed))}")


def _strings(value: Any, at: str, pattern: re.Pattern[str] | None, problems: list[str],
             nonempty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (nonempty and not value):
        problems.append(f"{at}: expected a {'non-empty ' if nonempty else ''}list of non-empty strings, "
                        f"got {show(value)}")
        return ()
    for v in value:
        if pattern is not None and not pattern.fullmatch(v):
            problems.append(f"{at}: expected entries matching {pattern.pattern}, got {show(v)}")
    return tuple(value)


def _chip(key: str, node: Any, at: str, problems: list[str]) -> ChipMap | None:
    if not _NAME.fullmatch(key):
        problems.append(f"{at}: expected a lower-case ncu chip name as the key, got {show(key)}")
    if not isinstance(node, dict):
        problems.append(f"{at}: expected a mapping, got {show(node)}")
        return None
    fields = {"name", "gpus", "catalogs", "detect", "tensor_cores", "tensor_paths", "excluded", "inferred_disjoint"}
    _keys(node, f"{at}.", fields, {"name", "gpus", "catalogs", "detect", "tensor_paths"}, problems)
    catalogs = _strings(node.get("catalogs"), f"{at}.catalogs", _NAME, problems)
    if catalogs and catalogs[0] != key:
        problems.append(f"{at}.catalogs: expected {key!r} first (the map's own catalog), got {show(catalogs[0])}")
    for c in catalogs:
        if _NAME.fullmatch(c) and not resources.files("perfreport.ncu.catalog").joinpath(
                "chips", f"metrics_{c}.csv.gz").is_file():
            problems.append(f"{at}.catalogs: no file chips/metrics_{c}.csv.gz for {c!r}")
    cc, ids, names = _detect(node.get("detect"), f"{at}.detect", problems)
    cores = node.get("tensor_cores", True)
    if not isinstance(cores, bool):
        problems.append(f"{at}.tensor_cores: expected true or false, got {show(cores)}")
        cores = True
    paths = _paths(node.get("tensor_paths"), f"{at}.tensor_paths", cores, problems)
    if not cores:
        for field in ("excluded", "inferred_disjoint"):
            if node.get(field):
                problems.append(f"{at}.{field}: expected none on a chip with tensor_cores: false, got "
                                f"{show(node[field])}")
    excluded = _excluded(node.get("excluded", {}), f"{at}.excluded", paths, problems)
    pairs = _pairs(node.get("inferred_disjoint", []), f"{at}.inferred_disjoint", paths, problems)
    name = node.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{at}.name: expected a non-empty string, got {show(name)}")
    gpus = _strings(node.get("gpus"), f"{at}.gpus", None, problems)
    return ChipMap(key, str(name), gpus, catalogs, cc, ids, names, paths, excluded, pairs, cores)


def _detect(node: Any, at: str, problems: list[str]) -> tuple[tuple[str, ...], tuple[int, ...],
                                                               tuple[re.Pattern[str], ...]]:
    if not isinstance(node, dict):
        problems.append(f"{at}: expected a mapping with cc (and chip_ids, device_names), got {show(node)}")
        return (), (), ()
    _keys(node, f"{at}.", {"cc", "chip_ids", "device_names"}, {"cc"}, problems)
    cc = _strings(node.get("cc"), f"{at}.cc", _CC, problems)
    ids = node.get("chip_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids):
        problems.append(f"{at}.chip_ids: expected a list of positive integers, got {show(ids)}")
        ids = []
    patterns = []
    for text in _strings(node.get("device_names", []), f"{at}.device_names", None, problems, nonempty=False):
        try:
            patterns.append(re.compile(text, re.IGNORECASE))
        except re.error as exc:
            problems.append(f"{at}.device_names: expected a regular expression, got {show(text)} ({exc})")
    return cc, tuple(ids), tuple(patterns)


def _paths(node: Any, at: str, cores: bool, problems: list[str]) -> dict[str, TensorPath]:
    # `{}` only with tensor_cores: false, so that a map emptied by mistake is not read as "no tensor cores"
    if not cores:
        if node != {}:
            problems.append(f"{at}: expected {{}} on a chip with tensor_cores: false, got {show(node)}")
        return {}
    if not isinstance(node, dict) or not node:
        problems.append(f"{at}: expected a non-empty mapping of path key -> flops, peak (or tensor_cores: false "
                        f"and {{}}), got {show(node)}")
        return {}
    out: dict[str, TensorPath] = {}
    for key, spec in node.items():
        here = f"{at}.{key}"
        if not isinstance(spec, dict):
            problems.append(f"{here}: expected a mapping with flops and peak, got {show(spec)}")
            continue
        _keys(spec, f"{here}.", {"flops", "peak", "integer"}, {"flops", "peak"}, problems)
        flops, peak, integer = spec.get("flops"), spec.get("peak"), spec.get("integer", False)
        for field, value, suffix in (("flops", flops, ".sum"), ("peak", peak, ".sum.peak_sustained")):
            if not (isinstance(value, str) and value.startswith(TENSOR_PREFIX) and value.endswith(suffix)
                    and _METRIC.fullmatch(value.removesuffix(suffix))):
                problems.append(f"{here}.{field}: expected a {TENSOR_PREFIX}* counter ending in {suffix}, "
                                f"got {show(value)}")
        if not isinstance(integer, bool):
            problems.append(f"{here}.integer: expected true or false, got {show(integer)}")
        out[str(key)] = TensorPath(str(key), str(flops), str(peak), integer is True)
    seen: dict[str, str] = {}
    for p in out.values():
        if p.flops in seen:
            problems.append(f"{at}.{p.key}.flops: {p.flops} is also path {seen[p.flops]!r}; expected each counter "
                            f"once (adding it twice counts its ops twice)")
        seen.setdefault(p.flops, p.key)
    return out


def _excluded(node: Any, at: str, paths: Mapping[str, TensorPath], problems: list[str]) -> tuple[Excluded, ...]:
    if not isinstance(node, dict):
        problems.append(f"{at}: expected a mapping of metric -> covered_by or reason, got {show(node)}")
        return ()
    out = []
    for metric, spec in node.items():
        here = f"{at}.{metric}"
        if not (isinstance(metric, str) and metric.startswith(TENSOR_PREFIX) and _METRIC.fullmatch(metric)):
            problems.append(f"{here}: expected a {TENSOR_PREFIX}* counter name (no suffix) as the key")
        if not isinstance(spec, dict) or len(set(spec) & {"covered_by", "reason"}) != 1:
            problems.append(f"{here}: expected a mapping with exactly one of covered_by, reason, got {show(spec)}")
            continue
        _keys(spec, f"{here}.", {"covered_by", "reason"}, set(), problems)
        covered = _strings(spec["covered_by"], f"{here}.covered_by", None, problems) if "covered_by" in spec else ()
        for k in covered:
            if k not in paths:
                problems.append(f"{here}.covered_by: expected path keys of this chip, got {show(k)}")
        reason = spec.get("reason")
        if "reason" in spec and not (isinstance(reason, str) and reason):
            problems.append(f"{here}.reason: expected a non-empty string, got {show(reason)}")
        out.append(Excluded(str(metric), covered, reason if isinstance(reason, str) else None))
    return tuple(out)


def _pairs(node: Any, at: str, paths: Mapping[str, TensorPath], problems: list[str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, list):
        problems.append(f"{at}: expected a list of [path, path] pairs, got {show(node)}")
        return ()
    out = []
    for i, pair in enumerate(node):
        if not (isinstance(pair, list) and len(pair) == 2 and all(p in paths for p in pair) and pair[0] != pair[1]):
            problems.append(f"{at}[{i}]: expected two different path keys of this chip, got {show(pair)}")
            continue
        out.append((str(pair[0]), str(pair[1])))
    return tuple(out)


def _across(maps: Mapping[str, ChipMap]) -> list[str]:
    """Problems between chips: an ncu catalog or chip id claimed twice, a CC two maps take for any name."""
    problems = []
    for what, get in (("catalogs", lambda m: m.catalogs), ("detect.chip_ids", lambda m: m.chip_ids)):
        owner: dict[Any, str] = {}
        for key, m in maps.items():
            for v in get(m):
                if v in owner:
                    problems.append(f"chips.{key}.{what}: {v!r} is also chips.{owner[v]}'s; expected one owner")
                owner.setdefault(v, key)
    for key, m in maps.items():
        for other, o in maps.items():
            shared = sorted(set(m.cc) & set(o.cc))
            if key < other and shared and not (m.device_names and o.device_names):
                problems.append(f"chips.{other}.detect: CC {', '.join(shared)} is also chips.{key}'s; expected "
                                f"device_names on both so that one export picks one map")
    return problems
