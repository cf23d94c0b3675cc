"""sol-ceilings.yaml: per-hardware speed-of-light ceilings, key paths, and the kernel family -> ceiling map.

Every peak number lives in perfreport/config/sol-ceilings.yaml (with its datasheet source); none is written
here. A key path names one ceiling: `<hw>.<name>` for a datasheet peak (`h200_sm90.bf16_dense_tflops`) and
`<hw>.empirical.<name>` for one measured on our machines. Each hardware block also says how a capture of that GPU
is recognized (`cc`, `device_names`, `examples`; Ceilings.hardware_for_device). docs/ceilings.md describes the file.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from perfreport.config.validate import cut
from perfreport.errors import ConfigError, InputError, PerfReportError
from perfreport.yamlio import UniqueKeyLoader, error_place

SCHEMA_VERSION = 1
FALLBACK_FAMILY = "other"
CeilingKind = Literal["compute", "memory", "interconnect"]
CeilingUnit = Literal["tflops", "tbps", "tops"]

_PACKAGED = ("sol-ceilings.yaml",)
_TOKEN_RE = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]*_(tflops|tops|tbps)$")
_TOP_KEYS = ("schema_version", "hardware", "category_ceiling_map", "dtype_ceiling_map", "families",
             "achievable_ceiling_map")
_HW_KEYS = ("description", "cc", "device_names", "examples", "datasheet", "empirical", "launch_floor_us")
_DEVICE_KEYS = ("cc", "device_names", "examples")
_CC_RE = re.compile(r"^(\d+)\.(\d+)$")
_TOKEN_CC_RE = re.compile(r"_sm(\d+)$")
_DATASHEET_KEYS = ("value", "source")
_EMPIRICAL_KEYS = ("value", "method", "measured", "where")


@dataclass(frozen=True)
class CeilingRef:
    """One resolved ceiling: its key path, its peak value and what kind of roof it is."""

    key: str  # e.g. 'h200_sm90.bf16_dense_tflops'
    value: float
    kind: CeilingKind
    unit: CeilingUnit


def ceiling_kind(name: str) -> tuple[CeilingKind, CeilingUnit]:
    """Return (kind, unit) from a ceiling name's suffix: *_tflops/*_tops compute, nvlink* interconnect."""
    if name.endswith("_tflops"):
        return "compute", "tflops"
    if name.endswith("_tops"):
        return "compute", "tops"
    if name.endswith("_tbps"):
        return ("interconnect" if name.startswith("nvlink") else "memory"), "tbps"
    raise PerfReportError(
        f"ceiling name {name!r}: no unit suffix; expected one ending in _tflops, _tops or _tbps "
        f"(e.g. 'bf16_dense_tflops', 'hbm_tbps'). Rename the key in the ceilings file."
    )


def _got(value: Any) -> str:
    """The bad value, cut: a wrong file named as override must not be echoed whole."""
    return f"got {type(value).__name__} {cut(repr(value))}"


class _Checker:
    """Collect every problem (and unknown-key warning) with its path, so one error lists them all."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def mapping(self, path: str, value: Any, what: str) -> bool:
        if isinstance(value, dict):
            return True
        self.problem(path, f"expected a mapping of {what}, {_got(value)}")
        return False

    def unknown_keys(self, path: str, block: dict[str, Any], known: tuple[str, ...]) -> None:
        extra = sorted(str(k) for k in block if k not in known)
        if extra:
            msg = f"{path}: unknown key(s) {extra}; known: {list(known)}. Remove or rename them."
            (self.problems if self.strict else self.warnings).append(msg)

    def positive_number(self, path: str, value: Any) -> None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value <= 0:
            self.problem(path, f"expected a number > 0 in the unit the key name ends with, {_got(value)}")

    def text(self, path: str, value: Any, what: str) -> None:
        if not isinstance(value, str) or not value.strip():
            self.problem(path, "missing" if value is None else f"expected {what}, {_got(value)}")


def _check_datasheet_entry(c: _Checker, path: str, entry: Any) -> None:
    if not c.mapping(path, entry, "{value, source}"):
        return
    c.unknown_keys(path, entry, _DATASHEET_KEYS)
    if "value" not in entry:
        c.problem(f"{path}.value", "missing (expected the dense peak as a number > 0)")
    else:
        c.positive_number(f"{path}.value", entry["value"])
    c.text(f"{path}.source", entry.get("source"), "a string naming the datasheet (title + URL)")


def _check_empirical_entry(c: _Checker, path: str, entry: Any) -> None:
    if not c.mapping(path, entry, "{value, method, measured, where}"):
        return
    c.unknown_keys(path, entry, _EMPIRICAL_KEYS)
    c.text(f"{path}.method", entry.get("method"), "a string saying how the value is measured")
    if entry.get("value") is None:
        return
    c.positive_number(f"{path}.value", entry["value"])
    measured = entry.get("measured")
    if not isinstance(measured, datetime.date) and not (isinstance(measured, str) and measured.strip()):
        c.problem(f"{path}.measured", f"expected the date it was measured (YYYY-MM-DD), {_got(measured)}")
    c.text(f"{path}.where", entry.get("where"), "a string naming the machine and GPU it was measured on")


def _display_key(name: str) -> str:
    """A display name as it is matched: stripped, runs of whitespace made one space."""
    return " ".join(name.split())


def _check_device_keys(c: _Checker, path: str, hw: Any, block: dict[str, Any], *, required: bool,
                       complete: bool) -> None:
    """cc, device_names and examples: how a capture is recognized. Required in the packaged file; in an override a
    new block may leave all three out (it is then only named by token), but one of them needs the other two; a
    known block may change any one of them (the merged file is checked as a whole afterwards)."""
    present = [k for k in _DEVICE_KEYS if k in block]
    for key in _DEVICE_KEYS:
        if key not in block and (required or (complete and present)):
            why = "every packaged block is recognized from its captures" if required else \
                f"{present[0]} is given, and a block with one of {list(_DEVICE_KEYS)} needs all three"
            c.problem(f"{path}.{key}", f"missing ({why}; e.g. cc: \"9.0\", device_names: ['NVIDIA H200'], "
                      f"examples: ['NVIDIA H200'])")
    if "cc" in block:
        cc = block["cc"]
        m = _CC_RE.fullmatch(cc.strip()) if isinstance(cc, str) else None
        if m is None:
            c.problem(f"{path}.cc", f"expected the compute capability as a quoted '<major>.<minor>' string such as "
                      f"\"9.0\" (quote it: YAML reads 9.0 as a number), {_got(cc)}")
        elif isinstance(hw, str) and (t := _TOKEN_CC_RE.search(hw)) and t.group(1) != m.group(1) + m.group(2):
            c.problem(f"{path}.cc", f"{cc!r} disagrees with the token's _sm{t.group(1)} suffix "
                      f"(<product>_sm<CC major><CC minor>): fix one of them")
    _check_list(c, f"{path}.device_names", block, "expected a non-empty list of regexes that fully match ncu's "
                "device__attribute_display_name, e.g. ['NVIDIA H200']", _regex_problem)
    _check_list(c, f"{path}.examples", block, "expected a non-empty list of display names as ncu prints them, e.g. "
                "['NVIDIA H200'] (each is checked against device_names)",
                lambda e: None if isinstance(e, str) and e.strip() else f"expected a display name string, {_got(e)}")


def _regex_problem(pattern: Any) -> str | None:
    """Why a device_names entry is not a usable pattern, or None."""
    try:
        if not isinstance(pattern, str) or not pattern.strip():
            raise TypeError("not a non-empty string")
        re.compile(pattern, re.IGNORECASE)
    except (re.error, TypeError) as exc:
        return f"{cut(repr(pattern))} is not a valid Python regex ({exc})"
    return None


def _check_list(c: _Checker, path: str, block: dict[str, Any], expected: str,
                item_problem: Callable[[Any], str | None]) -> None:
    """A non-empty list under the last key of `path` (when the block has it), each item held to `item_problem`."""
    key = path.rsplit(".", 1)[1]
    if key not in block:
        return
    items = block[key]
    if not isinstance(items, list) or not items:
        c.problem(path, f"{expected}, {_got(items)}")
        return
    for i, item in enumerate(items):
        if (problem := item_problem(item)) is not None:
            c.problem(f"{path}[{i}]", problem)


def _check_hardware(c: _Checker, path: str, block: Any, *, complete: bool, packaged: bool = False) -> None:
    if not c.mapping(path, block, "description, datasheet, empirical"):
        return
    c.unknown_keys(path, block, _HW_KEYS)
    if complete or "description" in block:
        c.text(f"{path}.description", block.get("description"), "a one-line description of the GPU")
    _check_device_keys(c, path, path.split(".", 1)[1], block, required=packaged, complete=complete)
    if block.get("launch_floor_us") is not None:
        _check_empirical_entry(c, f"{path}.launch_floor_us", block["launch_floor_us"])
    for section, check in (("datasheet", _check_datasheet_entry), ("empirical", _check_empirical_entry)):
        if section not in block:
            if complete and section == "datasheet":
                c.problem(f"{path}.datasheet", "missing (expected ceiling name -> {value, source})")
            continue
        entries = block[section]
        if entries is None and section == "empirical":
            continue
        if not c.mapping(f"{path}.{section}", entries, "ceiling name -> entry"):
            continue
        if complete and section == "datasheet" and not entries:
            c.problem(f"{path}.datasheet", "empty: expected at least one ceiling name -> {value, source}")
        for name, entry in entries.items():
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
                c.problem(f"{path}.{section}.{name}", "ceiling name must be lower_snake_case ending in "
                          "_tflops, _tops or _tbps (the unit), e.g. 'fp8_dense_tflops'")
            check(c, f"{path}.{section}.{name}", entry)


def _check_name_map(c: _Checker, path: str, mapping: Any) -> None:
    if not c.mapping(path, mapping, "name -> ceiling name"):
        return
    for key, name in mapping.items():
        if not isinstance(key, str) or not _TOKEN_RE.fullmatch(key):
            c.problem(f"{path}.{key}", "key must be lower_snake_case, e.g. 'gemm' or 'fp8'")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            c.problem(f"{path}.{key}", f"expected a ceiling name ending in _tflops/_tops/_tbps, {_got(name)}")


def _check_achievable_map(c: _Checker, mapping: Any) -> None:
    if not c.mapping("achievable_ceiling_map", mapping, "datasheet ceiling name -> [measured ceiling names]"):
        return
    for key, names in mapping.items():
        path = f"achievable_ceiling_map.{key}"
        if not isinstance(key, str) or not _NAME_RE.fullmatch(key):
            c.problem(path, "key must be a datasheet ceiling name ending in _tflops/_tops/_tbps")
        if not isinstance(names, list) or not names:
            c.problem(path, f"expected a non-empty list of measured ceiling names, best first, {_got(names)}")
            continue
        for i, name in enumerate(names):
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
                c.problem(f"{path}[{i}]", f"expected a ceiling name ending in _tflops/_tops/_tbps, {_got(name)}")
            elif isinstance(key, str) and ceiling_kind(name) != ceiling_kind(key):
                c.problem(f"{path}[{i}]", f"{name!r} is not in the unit of {key!r}: a measured roof stands for a "
                          f"datasheet roof of the same kind")


def _check_families(c: _Checker, families: Any) -> None:
    if not isinstance(families, list) or not families:
        c.problem("families", f"expected a non-empty list of {{family, patterns}}, {_got(families)}")
        return
    seen: set[str] = set()
    for i, rule in enumerate(families):
        path = f"families[{i}]"
        if not c.mapping(path, rule, "{family, patterns}"):
            continue
        c.unknown_keys(path, rule, ("family", "patterns"))
        name = rule.get("family")
        if not isinstance(name, str) or not _TOKEN_RE.fullmatch(name):
            c.problem(f"{path}.family", f"expected a lower_snake_case family name, {_got(name)}")
        elif name in seen:
            c.problem(f"{path}.family", f"{name!r} appears twice; merge its patterns into one rule")
        else:
            seen.add(name)
        patterns = rule.get("patterns")
        if not isinstance(patterns, list) or not patterns:
            c.problem(f"{path}.patterns", f"expected a non-empty list of regex strings, {_got(patterns)}")
            continue
        for j, pattern in enumerate(patterns):
            try:
                re.compile(pattern, re.IGNORECASE)
            except (re.error, TypeError) as exc:
                c.problem(f"{path}.patterns[{j}]", f"{pattern!r} is not a valid Python regex ({exc})")


def _check_doc(c: _Checker, doc: Any, *, base_hardware: set[str] | None) -> None:
    """Check shapes; base_hardware set means doc is an override (sections optional, known hw partial)."""
    if not c.mapping("(top level)", doc, "schema_version, hardware, ... (see docs/ceilings.md)"):
        return
    c.unknown_keys("(top level)", doc, _TOP_KEYS)
    partial = base_hardware is not None
    if not partial or "schema_version" in doc:
        version = doc.get("schema_version")
        if version != SCHEMA_VERSION or isinstance(version, bool):
            c.problem("schema_version", f"expected {SCHEMA_VERSION}, {_got(version)}")
    for key in _TOP_KEYS[1:]:
        if key not in doc and not partial:
            c.problem(key, "missing (see docs/ceilings.md for the file layout)")
    hardware = doc.get("hardware", {})
    if "hardware" in doc and c.mapping("hardware", hardware, "hardware token -> block"):
        for hw, block in hardware.items():
            if not isinstance(hw, str) or not _TOKEN_RE.fullmatch(hw):
                c.problem(f"hardware.{hw}", "hardware token must be lower_snake_case, e.g. 'h200_sm90'")
            known = base_hardware is not None and hw in base_hardware
            _check_hardware(c, f"hardware.{hw}", block, complete=not known, packaged=not partial)
    for key in ("category_ceiling_map", "dtype_ceiling_map"):
        if key in doc:
            _check_name_map(c, key, doc[key])
    if "families" in doc:
        _check_families(c, doc["families"])
    if "achievable_ceiling_map" in doc:
        _check_achievable_map(c, doc["achievable_ceiling_map"])


def _check_references(c: _Checker, doc: dict[str, Any]) -> None:
    """Cross-check a complete document: every family has a ceiling, every mapped ceiling exists somewhere."""
    known_names = sorted({n for b in doc["hardware"].values() for n in b.get("datasheet", {})})
    families = [rule["family"] for rule in doc["families"]]
    category = doc["category_ceiling_map"]
    for family in [*families, FALLBACK_FAMILY]:
        if family not in category:
            c.problem(f"category_ceiling_map.{family}", "missing: every family (and 'other', the fallback) "
                      "needs a ceiling name, e.g. 'hbm_tbps'")
    for family in category:
        if family not in families and family != FALLBACK_FAMILY:
            c.warnings.append(f"category_ceiling_map.{family}: no rule in `families` produces this family")
    for key in ("category_ceiling_map", "dtype_ceiling_map"):
        for name_key, name in doc[key].items():
            if name not in known_names:
                c.problem(f"{key}.{name_key}", f"{name!r} is not a datasheet ceiling of any hardware; "
                          f"known: {known_names}")
            elif key == "dtype_ceiling_map" and ceiling_kind(name)[0] != "compute":
                c.problem(f"{key}.{name_key}", f"{name!r} is not a compute ceiling (_tflops/_tops)")
    _check_devices(c, doc["hardware"])


def _check_devices(c: _Checker, hardware: dict[str, Any]) -> None:
    """Hold every block's examples against its own device_names and every other block's: each example matches its
    own block and no other (so no display name resolves to two tokens), and each pattern matches one of its own
    examples (so every pattern is tested). Runs on a document whose shapes passed."""
    compiled = {hw: [re.compile(p, re.IGNORECASE) for p in block["device_names"]]
                for hw, block in hardware.items() if isinstance(block.get("device_names"), list)}
    for hw, patterns in compiled.items():
        block = hardware[hw]
        if not isinstance(block.get("examples"), list):
            c.problem(f"hardware.{hw}.examples", "missing: a block with device_names needs examples (display names "
                      "each of its patterns matches), so the patterns are tested")
            continue
        examples = [_display_key(e) for e in block["examples"]]
        for i, example in enumerate(examples):
            if not any(p.fullmatch(example) for p in patterns):
                c.problem(f"hardware.{hw}.examples[{i}]", f"{example!r} fully matches none of hardware.{hw}."
                          f"device_names {block['device_names']}: fix the pattern or the example")
            for other, other_patterns in compiled.items():
                hit = next((j for j, p in enumerate(other_patterns) if p.fullmatch(example)), None)
                if other != hw and hit is not None:
                    c.problem(f"hardware.{hw}.examples[{i}]", f"{example!r} also fully matches hardware.{other}."
                              f"device_names[{hit}] {hardware[other]['device_names'][hit]!r}: a capture of this GPU "
                              f"would resolve to two tokens; narrow one of the patterns")
        for j, pattern in enumerate(patterns):
            if not any(pattern.fullmatch(e) for e in examples):
                c.problem(f"hardware.{hw}.device_names[{j}]", f"{pattern.pattern!r} matches none of hardware.{hw}."
                          f"examples: add a display name it matches (examples make every pattern tested)")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge over onto a copy of base: hardware blocks merge per entry, maps per key, lists replace."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key == "hardware":
            for hw, block in value.items():
                dst = out["hardware"].setdefault(hw, {})
                for section, content in block.items():
                    if content is None and section == "empirical":
                        continue
                    if section in ("datasheet", "empirical") and isinstance(content, dict):
                        dst.setdefault(section, {}).update(copy.deepcopy(content))
                    else:
                        dst[section] = copy.deepcopy(content)
        elif key in ("category_ceiling_map", "dtype_ceiling_map", "achievable_ceiling_map"):
            out.setdefault(key, {}).update(copy.deepcopy(value))
        else:
            out[key] = copy.deepcopy(value)
    return out


def _normalize_dates(doc: dict[str, Any]) -> None:
    for block in doc["hardware"].values():
        for entry in (block.get("empirical") or {}).values():
            if isinstance(entry.get("measured"), datetime.date):
                entry["measured"] = entry["measured"].isoformat()


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as exc:  # where and what, without the snippet of the file's content the error carries
        where = f" at {place}" if (place := error_place(exc)) else ""
        raise ConfigError(source, [f"not valid YAML{where}: {getattr(exc, 'problem', None) or 'parse error'}"]) \
            from None


class Ceilings:
    """The validated (and possibly overridden) ceilings: look up values, classify kernels, pick a ceiling."""

    def __init__(self, doc: dict[str, Any], sources: list[str], warnings: list[str]) -> None:
        self._doc = doc
        self._hardware: dict[str, dict[str, Any]] = doc["hardware"]
        self._category: dict[str, str] = dict(doc["category_ceiling_map"])
        self._dtype: dict[str, str] = dict(doc["dtype_ceiling_map"])
        self._achievable: dict[str, list[str]] = {k: list(v) for k, v in doc.get("achievable_ceiling_map", {}).items()}
        self._devices = [
            (hw, str(block["cc"]).strip(), [re.compile(p, re.IGNORECASE) for p in block["device_names"]])
            for hw, block in sorted(self._hardware.items()) if block.get("device_names") and block.get("cc")
        ]
        self._families = [
            (rule["family"], [re.compile(p, re.IGNORECASE) for p in rule["patterns"]])
            for rule in doc["families"]
        ]
        self.sources = tuple(sources)
        self.warnings = tuple(warnings)

    def __repr__(self) -> str:
        """The ceilings as their validated document and sources: two equal ceilings have one repr (the site keys the
        pages it keeps on it)."""
        return f"Ceilings({json.dumps(self._doc, sort_keys=True, default=str)}, sources={self.sources!r})"

    def with_hardware(self, token: str, block: dict[str, Any], source: str) -> Ceilings:
        """These ceilings plus one hardware block built here, not read from YAML (hardware: from-capture,
        config/capture_ceilings.py); `source` is the file it came from, listed with the others."""
        doc = {**self._doc, "hardware": {**self._hardware, token: block}}  # a token given again is replaced
        sources = list(self.sources) if source in self.sources else [*self.sources, source]
        return Ceilings(doc, sources, list(self.warnings))

    def dtype_ceiling(self, dtype: str) -> str | None:
        """The ceiling name a tensor dtype is judged against (dtype_ceiling_map), or None when it maps to none."""
        return self._dtype.get(dtype)

    def family_ceiling(self, family: str) -> str | None:
        """The ceiling name a kernel family is judged against by default (category_ceiling_map)."""
        return self._category.get(family)

    def hardware_keys(self) -> list[str]:
        """Return the hardware tokens, sorted."""
        return sorted(self._hardware)

    def has_hardware(self, hardware: str) -> bool:
        """Return True when hardware is a known token such as 'h200_sm90'."""
        return hardware in self._hardware

    def description(self, hardware: str) -> str:
        """Return the one-line description of a hardware token."""
        return str(self._block(hardware).get("description", ""))

    def compute_capability(self, hardware: str) -> str | None:
        """Return the block's `cc` ('9.0'), or None for an override block that does not say."""
        cc = self._block(hardware).get("cc")
        return None if cc is None else str(cc).strip()

    def hardware_for_device(self, display_name: str | None, cc: str | None) -> str | None:
        """Return the one hardware token a capture's GPU is: its `cc` equals cc and one of its `device_names` fully
        matches display_name (ncu's device__attribute_display_name, e.g. 'NVIDIA A100-PCIE-40GB'; stripped, runs of
        whitespace made one, case-insensitive). cc None or blank: the name alone decides. None when no token
        matches, or when two do (the loader refuses overlapping patterns among the blocks' examples)."""
        if not _display_key(display_name or ""):
            return None
        found = [hw for hw, hw_cc, patterns in self._devices if _fits(hw_cc, patterns, display_name or "", cc)]
        return found[0] if len(found) == 1 else None

    def matches_device(self, hardware: str, display_name: str, cc: str | None) -> bool | None:
        """Whether a capture's GPU (display name, compute capability) is the hardware token's board, by the token's
        `cc` and `device_names` as hardware_for_device reads them; None when the token declares neither."""
        return next((_fits(hw_cc, patterns, display_name, cc) for hw, hw_cc, patterns in self._devices
                     if hw == hardware), None)

    def families(self) -> list[str]:
        """Return family names in match order, then the fallback 'other'."""
        return [name for name, _ in self._families] + [FALLBACK_FAMILY]

    def key_paths(self, hardware: str) -> list[str]:
        """Return every key path of a hardware token: datasheet ones, then empirical ones."""
        block = self._block(hardware)
        paths = [f"{hardware}.{name}" for name in block.get("datasheet", {})]
        return paths + [f"{hardware}.empirical.{name}" for name in block.get("empirical") or {}]

    def classify(self, kernel_name: str) -> str:
        """Return the first family whose pattern matches kernel_name (re.search), else 'other'."""
        for name, patterns in self._families:
            if any(p.search(kernel_name) for p in patterns):
                return name
        return FALLBACK_FAMILY

    def entry(self, key_path: str) -> dict[str, Any]:
        """Return a copy of the entry at key_path: {value, source} or {value, method, measured, where}."""
        hardware, section, name = self._parse(key_path)
        entries = self._block(hardware).get(section) or {}
        if name not in entries:
            raise PerfReportError(
                f"ceiling key path {key_path!r}: {hardware} has no {section} ceiling {name!r}. "
                f"Available: {', '.join(self.key_paths(hardware)) or '(none)'}. "
                f"Pick one of those, or add the ceiling in a campaign override (docs/ceilings.md)."
            )
        return dict(entries[name])

    def value(self, key_path: str) -> float:
        """Return the peak at key_path; an empirical ceiling not yet measured (null) raises."""
        entry = self.entry(key_path)
        if entry.get("value") is None:
            hardware = key_path.split(".", 1)[0]
            datasheet = [p for p in self.key_paths(hardware) if ".empirical." not in p]
            raise PerfReportError(
                f"ceiling {key_path!r} has no value yet (null): it has not been measured. Measure it "
                f"({entry.get('method', 'method not given')}) and set value, measured and where in a "
                f"campaign override, or use a datasheet ceiling: {', '.join(datasheet)}."
            )
        return float(entry["value"])

    def ceiling_for(self, hardware: str, family: str, tensor_dtype: str | None = None) -> CeilingRef | None:
        """Pick the datasheet ceiling a kernel of family is judged against; None when the hardware lacks it.

        A family whose default ceiling is a compute one is a tensor family: a measured tensor_dtype replaces
        the default through dtype_ceiling_map (fp8 GEMM -> fp8_dense_tflops). Memory and interconnect
        families ignore tensor_dtype.
        """
        block = self._block(hardware)
        if family not in self._category:
            raise PerfReportError(
                f"kernel family {family!r} has no entry in category_ceiling_map; known families: "
                f"{', '.join(sorted(self._category))}. Use classify_family() to get a family, or map the "
                f"new family to a ceiling in a campaign override."
            )
        name = self._category[family]
        if tensor_dtype is not None and ceiling_kind(name)[0] == "compute":
            dtype = tensor_dtype.lower()
            if dtype not in self._dtype:
                raise PerfReportError(
                    f"tensor dtype {tensor_dtype!r} (family {family!r}, hardware {hardware}) has no entry in "
                    f"dtype_ceiling_map; known: {', '.join(sorted(self._dtype))}. Pass one of those, or None "
                    f"for the family default, or add the dtype in a campaign override."
                )
            name = self._dtype[dtype]
        entry = block.get("datasheet", {}).get(name)
        if entry is None:
            return None
        kind, unit = ceiling_kind(name)
        return CeilingRef(key=f"{hardware}.{name}", value=float(entry["value"]), kind=kind, unit=unit)

    def launch_floor(self, hardware: str) -> tuple[float, str] | None:
        """(µs, key path) of the shortest a kernel launch takes on this hardware, measured (hardware.<hw>.
        launch_floor_us): a launch-bound kernel cannot get below it; None where not measured."""
        entry = self._block(hardware).get("launch_floor_us") or {}
        value = entry.get("value")
        return None if value is None else (float(value), f"{hardware}.launch_floor_us")

    def achievable_for(self, ref: CeilingRef | None) -> CeilingRef | None:
        """The measured ceiling that stands for what the GPU really reaches on datasheet roof `ref`: the first
        name of achievable_ceiling_map[ref's name] measured for that hardware (None: not measured there)."""
        if ref is None or ".empirical." in ref.key:
            return None
        hardware, name = ref.key.split(".", 1)
        measured = self._block(hardware).get("empirical") or {}
        for candidate in self._achievable.get(name, []):
            value = (measured.get(candidate) or {}).get("value")
            if value is not None:
                return CeilingRef(key=f"{hardware}.empirical.{candidate}", value=float(value), kind=ref.kind,
                                  unit=ref.unit)
        return None

    def _block(self, hardware: str) -> dict[str, Any]:
        if hardware not in self._hardware:
            raise PerfReportError(
                f"hardware {hardware!r} is not in the ceilings file; "
                f"known: {', '.join(self.hardware_keys())}. "
                f"Use one of those tokens (e.g. in the campaign's `hardware:`), or add a hardware block in a "
                f"campaign ceilings override (docs/ceilings.md)."
            )
        return self._hardware[hardware]

    @staticmethod
    def _parse(key_path: str) -> tuple[str, str, str]:
        parts = key_path.split(".")
        if len(parts) == 2 and all(parts):
            return parts[0], "datasheet", parts[1]
        if len(parts) == 3 and parts[1] == "empirical" and parts[0] and parts[2]:
            return parts[0], "empirical", parts[2]
        hint = ""
        if len(parts) == 3 and parts[1] == "datasheet":
            hint = f" Datasheet ceilings have no section in the path: write '{parts[0]}.{parts[2]}'."
        raise PerfReportError(
            f"ceiling key path {key_path!r}: expected '<hardware>.<ceiling>' for a datasheet peak or "
            f"'<hardware>.empirical.<ceiling>' for a measured one, e.g. 'h200_sm90.bf16_dense_tflops'.{hint}"
        )


def classify_family(kernel_name: str, ceilings: Ceilings) -> str:
    """Return the kernel family of kernel_name: the first `families` rule that matches, else 'other'."""
    return ceilings.classify(kernel_name)


def packaged_ceilings_path() -> str:
    """Return where the packaged sol-ceilings.yaml lives, for messages."""
    return str(resources.files("perfreport.config").joinpath(*_PACKAGED))


def _read_packaged() -> str:
    return resources.files("perfreport.config").joinpath(*_PACKAGED).read_text("utf-8")


def _fits(hw_cc: str, patterns: list[re.Pattern[str]], display_name: str, cc: str | None) -> bool:
    """A capture's GPU is a token's board: its CC (blank: not checked) and one device_names pattern fully matching
    the display name (stripped, whitespace runs made one, case-insensitive)."""
    want = (cc or "").strip()
    name = _display_key(display_name)
    return (not want or want == hw_cc) and any(p.fullmatch(name) for p in patterns)


def load_ceilings(override: Path | None = None, *, strict: bool = False) -> Ceilings:
    """Load and validate the packaged ceilings, then deep-merge and validate an optional override file.

    Every problem is collected with its path and raised once as ConfigError. Unknown keys become warnings
    (Ceilings.warnings) unless strict, where they are problems too.
    """
    base_source = packaged_ceilings_path()
    base = _parse_yaml(_read_packaged(), base_source)
    checker = _Checker(strict)
    _check_doc(checker, base, base_hardware=None)
    if not checker.problems:
        _check_references(checker, base)
    if checker.problems:
        raise ConfigError(base_source, checker.problems)
    warnings = [f"{base_source}: {w}" for w in checker.warnings]
    doc, sources = base, [base_source]
    if override is not None:
        doc = _merge(base, _load_override(Path(override), set(base["hardware"]), strict, warnings))
        sources.append(str(override))
        merged = _Checker(strict)
        _check_references(merged, doc)
        if merged.problems:
            raise ConfigError(f"{override} (merged over {base_source})", merged.problems)
        warnings += [f"{override}: {w}" for w in merged.warnings if f"{base_source}: {w}" not in warnings]
    _normalize_dates(doc)
    return Ceilings(doc, sources, warnings)


def _load_override(path: Path, base_hardware: set[str], strict: bool, warnings: list[str]) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(
            f"ceilings override '{path}': file not found. Expected a YAML file shaped like sol-ceilings.yaml "
            f"(docs/ceilings.md, 'Campaign overrides'); fix the path or drop the override."
        )
    doc = _parse_yaml(path.read_text("utf-8"), str(path))
    if doc is None:
        doc = {}
    checker = _Checker(strict)
    _check_doc(checker, doc, base_hardware=base_hardware)
    if checker.problems:
        raise ConfigError(str(path), checker.problems)
    warnings.extend(f"{path}: {w}" for w in checker.warnings)
    return dict(doc)
