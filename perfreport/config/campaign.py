"""Campaign config: campaigns/<c>/config.yaml, validated as a whole file (every problem, with its path).

The context descriptor is all-optional here (import works on a half-filled campaign); a later publish step
asks ``missing_context_fields`` what is still empty. A null value means "not filled": it never overrides a
campaign default in a cell's deep merge.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

import yaml

from perfreport.config import capture_ceilings
from perfreport.config.context import (
    CAN_BE_INAPPLICABLE,
    CONTEXT_FIELDS,
    SOL_RIGOR_LEVELS,
    Check,
    deep_merge,
    is_int,
    is_not_applicable,
    nonempty_text,
    one_of,
    visible_text,
)
from perfreport.errors import ConfigError, IdError, InputError
from perfreport.files import write_text_atomic
from perfreport.ids import ID_PATTERN, check_id, is_valid_id
from perfreport.yamlio import UniqueKeyLoader, error_place

if TYPE_CHECKING:
    from perfreport.config.ceilings import Ceilings

SCHEMA_VERSION = 1
CONFIG_NAME = "config.yaml"
ID_EXPECTED = f"an id matching {ID_PATTERN} (letters, digits, '.', '_', '-'; no '/')"

TOP_KEYS = ("schema_version", "campaign", "hardware", "sol_rigor", "ceilings_override", "context", "cells",
            "krhpa")
CELL_KEYS = ("id", "description", "weight", "captures", "timelines", "trials", "steps", "samples", "not_measured",
             "context")
# A trials: file's trial number: the last digits of its name before the extension (torch_trace_t3.json.gz -> 3).
TRIAL_NUMBER = re.compile(r"(\d+)\D*$")


@dataclass
class Cell:
    """One measured configuration of a campaign; its context overrides the campaign defaults."""

    id: str
    description: str | None = None
    captures: list[str] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    timelines: list[str] = field(default_factory=list)  # nsys / PyTorch-profiler kernel timelines
    samples: list[str] = field(default_factory=list)  # continuous-profiler sample counts
    steps: list[str] = field(default_factory=list)  # PyTorch-profiler traces with one step per decode/prefill step
    # Timelines of repeated measurements (nsys / torch trace), one file per trial, numbered by trial_number.
    trials: list[str] = field(default_factory=list)
    # How much of the fleet's GPU time this cell stands for (any positive number: weights are normalised over the
    # campaign's cells); None: the cells weigh the same. Rankings across cells put every cell on this one base.
    weight: float | None = None
    # The why of `not_measured: "n/a: why"`: the cell's --set basic rows carry no %SoL on purpose (a live server
    # captured cheaply by attach), so the strict gate notes them; None: a basic-only row is a gap to re-capture.
    not_measured: str | None = None

    def effective_context(self, campaign: Campaign) -> dict[str, Any]:
        """Return the campaign context deep-merged with this cell's override (nulls never override)."""
        return deep_merge(campaign.context, self.context)

    def cell_dir(self, campaign: Campaign) -> Path:
        """Return campaign_dir/cells/<id>, where this cell's outputs live; refused where cells/ or cells/<id> is a
        link out of the campaign (an import would write there, a render read there)."""
        path = campaign.dir / "cells" / self.id
        for part in (path.parent, path):
            if part.is_symlink() and not part.resolve().is_relative_to(campaign.dir.resolve()):
                raise InputError(
                    f"'{part}' is a link to '{part.resolve()}', outside the campaign folder '{campaign.dir}'; a "
                    f"campaign's cell outputs stay inside it. Replace the link with a folder (move what it holds "
                    f"in), or import into a campaign where that folder lives.")
        return path

    def capture_paths(self, campaign: Campaign) -> list[Path]:
        """Return the captures resolved against the campaign folder (existence is checked on import)."""
        return [(campaign.dir / c).resolve() for c in self.captures]

    def timeline_paths(self, campaign: Campaign) -> list[Path]:
        """Return the timeline files (nsys, torch trace) resolved against the campaign folder."""
        return [(campaign.dir / c).resolve() for c in self.timelines]

    def trial_paths(self, campaign: Campaign) -> list[tuple[int, Path]]:
        """Return each trials: file with its trial number, in trial order (validated unique on load)."""
        return sorted((trial_number(c) or 0, (campaign.dir / c).resolve()) for c in self.trials)

    def step_paths(self, campaign: Campaign) -> list[Path]:
        """Return the step traces (page 3's step budget) resolved against the campaign folder."""
        return [(campaign.dir / c).resolve() for c in self.steps]

    def sample_paths(self, campaign: Campaign) -> list[Path]:
        """Return the sample-count files resolved against the campaign folder."""
        return [(campaign.dir / c).resolve() for c in self.samples]


@dataclass
class Campaign:
    """A loaded, validated campaigns/<c>/config.yaml."""

    id: str
    hardware: str
    sol_rigor: str
    dir: Path
    config_path: Path
    cells: list[Cell]
    context: dict[str, Any]
    ceilings_override: Path | None = None
    krhpa: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    # `hardware: from-capture`: `hardware` is then the token of capture-ceilings.json once an import wrote it
    # (FROM_CAPTURE before), and `capture_ceilings` that file's content (config/capture_ceilings.py)
    from_capture: bool = False
    capture_ceilings: dict[str, Any] | None = None

    def cell(self, cell_id: str) -> Cell:
        """Return the cell with this id, or raise listing the known ids."""
        check_id("cell", cell_id)
        for c in self.cells:
            if c.id == cell_id:
                return c
        known = ", ".join(c.id for c in self.cells) or "(none: the cells list is empty)"
        raise InputError(
            f"campaign {self.id!r} ({self.config_path}): no cell with id {cell_id!r}; known cell ids: "
            f"{known}. Use one of these, or add the cell under `cells:` in config.yaml."
        )


def trial_number(path: str) -> int | None:
    """The trial a trials: file measured: the last run of digits in its name without extensions; None without one."""
    stem = Path(path).name
    while Path(stem).suffix[1:].isalpha():  # drop extensions (.json.gz, .csv, .sqlite); h100.trace_t3 keeps its dot
        stem = Path(stem).stem
    match = TRIAL_NUMBER.search(stem)
    return int(match.group(1)) if match and int(match.group(1)) >= 1 else None


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _show(v: Any) -> str:
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "null (empty)"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


class _Walk:
    """Collect problems and unknown keys while walking the parsed YAML."""

    def __init__(self, strict: bool, root: Path | None = None) -> None:
        self.strict = strict
        self.root = root  # the campaign folder: every path the config names stays inside it
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def bad(self, path: str, expected: str, got: Any) -> None:
        hint = ""
        if ("string" in expected or expected.startswith("an id")) and isinstance(got, bool | int | float):
            hint = f" (YAML read it as {type(got).__name__}; quote it: \"{got}\")"
        self.problems.append(f"{path}: expected {expected}, got {_show(got)}{hint}")

    def extra(self, path: str, key: Any, known: Any) -> None:
        close = difflib.get_close_matches(str(key), list(known), n=1)
        hint = f"did you mean {close[0]!r}?" if close else "known keys here: " + ", ".join(known)
        if self.strict:
            self.problems.append(f"{path}: unknown key (not allowed with --strict); {hint}")
        else:
            self.warnings.append(f"{path}: unknown key, ignored; {hint}")

    def required(self, node: Mapping[str, Any], key: str, example: str) -> bool:
        if key in node:
            return True
        self.problems.append(f"{key}: required key is missing; add e.g. `{key}: {example}`")
        return False

    def context(self, node: Any, path: str) -> dict[str, Any]:
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            self.bad(path, "a mapping of sections (" + ", ".join(CONTEXT_FIELDS) + ")", node)
            return {}
        out: dict[str, Any] = {}
        for section, value in node.items():
            spath = _join(path, section)
            fields = CONTEXT_FIELDS.get(section) if isinstance(section, str) else None
            if fields is None:
                self.extra(spath, section, CONTEXT_FIELDS)
            elif value is not None and not isinstance(value, Mapping):
                self.bad(spath, "a mapping with keys " + ", ".join(fields), value)
            elif value is not None:
                out[section] = self._section(value, spath, fields, section)
        return out

    def _section(self, node: Mapping[Any, Any], path: str, fields: dict[str, Check], section: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            kpath = _join(path, key)
            check = fields.get(key) if isinstance(key, str) else None
            if check is None:
                self.extra(kpath, key, fields)
            elif is_not_applicable(value) and f"{section}.{key}" in CAN_BE_INAPPLICABLE:
                out[key] = value.strip()  # the marker instead of a value of the field's type (context.py)
            elif value is not None and (expected := check(value)):
                self.bad(kpath, expected, value)
            else:
                out[key] = value
        return out

    def cells(self, node: Any) -> list[Cell]:
        if node is None:
            return []
        if not isinstance(node, list):
            self.bad("cells", "a list of cells (mappings with id, description, captures, context)", node)
            return []
        cells: list[Cell] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(node):
            path = f"cells[{i}]"
            if not isinstance(item, Mapping):
                self.bad(path, "a mapping with keys " + ", ".join(CELL_KEYS), item)
                continue
            for key in item:
                if key not in CELL_KEYS:
                    self.extra(_join(path, key), key, CELL_KEYS)
            cell_id = self._cell_id(item, path, seen, i)
            description = item.get("description")
            if description is not None and (expected := nonempty_text(description)):
                self.bad(f"{path}.description", expected, description)
            captures = self._captures(item.get("captures"), f"{path}.captures")
            timelines = self._captures(item.get("timelines"), f"{path}.timelines")
            samples = self._captures(item.get("samples"), f"{path}.samples")
            steps = self._captures(item.get("steps"), f"{path}.steps")
            trials = self._trials(self._captures(item.get("trials"), f"{path}.trials"), f"{path}.trials")
            context = self.context(item.get("context"), f"{path}.context")
            weight = item.get("weight")
            if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int | float)
                                       or not 0 < weight < float("inf")):
                self.bad(f"{path}.weight", "a number > 0 (this cell's share of the fleet's GPU time, any scale)",
                         weight)
                weight = None
            marker = item.get("not_measured")
            not_measured = visible_text(str(marker)).partition(":")[2].strip() if is_not_applicable(marker) else None
            if marker is not None and not not_measured:
                self.bad(f"{path}.not_measured", "`n/a: why` (why this cell's --set basic rows have no %SoL, e.g. "
                         "`n/a: captured by attach on a live server at --set basic`)", marker)
                not_measured = None
            if cell_id is not None:
                cells.append(Cell(cell_id, description, captures, context, timelines, samples, steps, trials,
                                  None if weight is None else float(weight), not_measured))
        return cells

    def _cell_id(self, item: Mapping[str, Any], path: str, seen: dict[str, int], index: int) -> str | None:
        if "id" not in item:
            self.problems.append(f"{path}.id: required key is missing; every cell needs an id, e.g. "
                                 f"`id: prefill-t8192`")
            return None
        cell_id = item["id"]
        if not is_valid_id(cell_id):
            self.bad(f"{path}.id", ID_EXPECTED, cell_id)
            return None
        if cell_id in seen:
            self.problems.append(f"{path}.id: duplicate cell id {cell_id!r} (also cells[{seen[cell_id]}]"
                                 f".id); cell ids must be unique within a campaign: rename one")
            return None
        seen[cell_id] = index
        return str(cell_id)

    def _trials(self, files: list[str], path: str) -> list[str]:
        """Keep the trials: files whose names number a trial, each number once."""
        seen: dict[int, str] = {}
        out = []
        for item in files:
            number = trial_number(item)
            if number is None:
                self.problems.append(f"{path}: {item!r} names no trial number; expected the trial's number as the "
                                     f"last digits of the file name (torch_trace_t3.json.gz is trial 3): rename it")
            elif number in seen:
                self.problems.append(f"{path}: {item!r} and {seen[number]!r} are both trial {number}; each trial is "
                                     f"one file: rename or drop one")
            else:
                seen[number] = item
                out.append(item)
        return out

    def _captures(self, node: Any, path: str) -> list[str]:
        if node is None:
            return []
        if not isinstance(node, list):
            self.bad(path, "a list of paths relative to the campaign folder", node)
            return []
        out = []
        for i, item in enumerate(node):
            if nonempty_text(item):
                self.bad(f"{path}[{i}]", "a path (string) relative to the campaign folder", item)
            elif Path(item).is_absolute():
                self.problems.append(f"{path}[{i}]: expected a path relative to the campaign folder, got "
                                     f"absolute {item!r}; write it relative so the campaign stays portable")
            elif self.root is not None and not (self.root / item).resolve().is_relative_to(self.root.resolve()):
                self.problems.append(f"{path}[{i}]: {item!r} leads outside the campaign folder (to "
                                     f"{str((self.root / item).resolve())!r}); nothing outside the campaign is "
                                     f"read: copy the file into the campaign and name it relative to it")
            else:
                out.append(item)
        return out


def _validate(raw: Mapping[Any, Any], campaign_dir: Path, config_path: Path, strict: bool) -> Campaign:
    w = _Walk(strict, campaign_dir)
    for key in raw:
        if key not in TOP_KEYS:
            w.extra(str(key), key, TOP_KEYS)
    if w.required(raw, "schema_version", str(SCHEMA_VERSION)) and (
        not is_int(raw["schema_version"]) or raw["schema_version"] != SCHEMA_VERSION
    ):
        w.bad("schema_version", f"{SCHEMA_VERSION} (the only version this perfreport reads)",
              raw["schema_version"])
    if w.required(raw, "campaign", campaign_dir.name or "my-campaign") and not is_valid_id(raw["campaign"]):
        w.bad("campaign", ID_EXPECTED, raw["campaign"])
    if w.required(raw, "hardware", "h200_sm90") and (expected := nonempty_text(raw["hardware"])):
        w.bad("hardware", f"a ceiling token ({expected}) such as 'h200_sm90'", raw["hardware"])
    if w.required(raw, "sol_rigor", "L2") and (expected := one_of(*SOL_RIGOR_LEVELS)(raw["sol_rigor"])):
        w.bad("sol_rigor", expected, raw["sol_rigor"])
    from_capture = raw.get("hardware") == capture_ceilings.FROM_CAPTURE
    if from_capture and raw.get("sol_rigor") in SOL_RIGOR_LEVELS and raw["sol_rigor"] not in \
            capture_ceilings.RIGOR_LEVELS:
        w.problems.append(f"sol_rigor: {raw['sol_rigor']} with hardware: {capture_ceilings.FROM_CAPTURE}; expected "
                          f"{' or '.join(capture_ceilings.RIGOR_LEVELS)}: ncu's own device peaks at the clocks it "
                          f"saw stand below datasheet and measured ceilings. Name the GPU's token in `hardware:` "
                          f"for a higher rigor")
    override = _ceilings_override(w, raw.get("ceilings_override"), campaign_dir)
    if not w.problems and not from_capture and isinstance(raw.get("hardware"), str) and (
            unknown := unknown_hardware(raw["hardware"], override)):
        w.problems.append(unknown)
    # krhpa: only its shape is checked here, so import and render work on a half-filled rubric; its fields are
    # the publish gate's (lake.gate.krhpa_problems: --strict refuses, otherwise recorded) and page 7's.
    krhpa = raw.get("krhpa")
    if krhpa is not None and not isinstance(krhpa, Mapping):
        w.bad("krhpa", "a mapping with candidate and baseline (docs/frontier.md), or leave it out", krhpa)
    context = w.context(raw.get("context"), "context")
    cells = w.cells(raw.get("cells"))
    _one_sol_rigor(w, raw.get("sol_rigor"), context, cells)
    if w.problems:
        raise ConfigError(str(config_path), w.problems)
    found = capture_ceilings.read(campaign_dir) if from_capture else None
    return Campaign(
        id=raw["campaign"], hardware=found["token"] if found else raw["hardware"], sol_rigor=raw["sol_rigor"],
        dir=campaign_dir, config_path=config_path, cells=cells, context=context, ceilings_override=override,
        krhpa=dict(krhpa) if krhpa is not None else None, warnings=w.warnings, from_capture=from_capture,
        capture_ceilings=found,
    )


def _one_sol_rigor(w: _Walk, top: Any, context: dict[str, Any], cells: list[Cell]) -> None:
    """sol_rigor is one field, the top-level one: every context's grounding.sol_rigor is set from it (the lake and
    the gate read it there). Written again in a context it is refused where it differs, and a warning where equal."""
    if top not in SOL_RIGOR_LEVELS:
        return
    for path, ctx in [("context", context), *((f"cells[{c.id}].context", c.context) for c in cells)]:
        given = (ctx.get("grounding") or {}).pop("sol_rigor", None)
        if given is not None and given != top:
            w.problems.append(f"{path}.grounding.sol_rigor: {given!r} differs from the top-level sol_rigor: "
                              f"{top!r}; sol_rigor is one field: set it once at the top of config.yaml and drop "
                              f"this one")
        elif given is not None:
            w.warnings.append(f"{path}.grounding.sol_rigor repeats the top-level sol_rigor: {top}; it is one "
                              f"field, set at the top: drop this line")
    context.setdefault("grounding", {})["sol_rigor"] = top


def campaign_ceilings(campaign: Campaign) -> Ceilings:
    """The ceilings a campaign's kernels are scored against: the packaged file, its override, and for
    `hardware: from-capture` the block of ncu's device peaks its imports wrote (capture-ceilings.json)."""
    from perfreport.config.ceilings import load_ceilings

    ceilings = load_ceilings(campaign.ceilings_override)
    doc = campaign.capture_ceilings
    if doc is None:
        return ceilings
    return ceilings.with_hardware(doc["token"], capture_ceilings.hardware_block(doc),
                                  str(capture_ceilings.path_of(campaign.dir)))


def unknown_hardware(hardware: str, override: Path | None) -> str | None:
    """The problem with a `hardware:` token sol-ceilings.yaml (and the campaign's override) does not hold, listing
    the known ones; None when it is known. A ceilings file that does not load is reported where it is used."""
    from perfreport.config.ceilings import load_ceilings
    from perfreport.errors import PerfReportError

    try:
        ceilings = load_ceilings(override)
    except PerfReportError:
        return None
    if ceilings.has_hardware(hardware):
        return None
    near = difflib.get_close_matches(hardware, ceilings.hardware_keys(), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return (f"hardware: {hardware!r} is not a ceiling token{hint}; known: {', '.join(ceilings.hardware_keys())}. "
            f"Use one of these, `{capture_ceilings.FROM_CAPTURE}` (ncu's own device peaks of the captures), or add "
            f"the board via `ceilings_override:`")


def _ceilings_override(w: _Walk, value: Any, campaign_dir: Path) -> Path | None:
    if value is None:
        return None
    if nonempty_text(value):
        w.bad("ceilings_override", "a path (string) relative to the campaign folder, or null", value)
        return None
    if Path(value).is_absolute():
        w.problems.append(f"ceilings_override: expected a path relative to the campaign folder, got absolute "
                          f"{value!r}; write it relative so the campaign stays portable")
        return None
    path = (campaign_dir / value).resolve()
    if not path.is_relative_to(campaign_dir.resolve()):
        w.problems.append(f"ceilings_override: {value!r} leads outside the campaign folder {str(campaign_dir)!r} "
                          f"(to {str(path)!r}); copy the ceilings file into the campaign and name it relative to it")
        return None
    if not path.is_file():
        w.problems.append(f"ceilings_override: file {str(path)!r} not found (the path is relative to the "
                          f"campaign folder {str(campaign_dir)!r}); create it or set "
                          f"`ceilings_override: null`")
        return None
    return path


def _read_yaml(config_path: Path) -> Any:
    try:
        text = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{config_path}: cannot read it ({exc}); expected a UTF-8 YAML file.") from exc
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        where = error_place(exc) or "(unknown line)"
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        detail = f"{context}; {problem}" if context else problem
        if problem.startswith("duplicate key"):
            raise ConfigError(str(config_path), [f"{where}: {problem}"]) from None
        raise ConfigError(str(config_path), [
            f"{where}: YAML syntax error: {detail}. Fix the indentation or quote the value there."
        ]) from exc


def load_campaign(campaign_dir: Path, strict: bool = False) -> Campaign:
    """Load and validate campaign_dir/config.yaml, raising one ConfigError listing every problem."""
    campaign_dir = Path(campaign_dir)
    config_path = campaign_dir / CONFIG_NAME
    if not campaign_dir.is_dir():
        state = "is not a folder" if campaign_dir.exists() else "does not exist"
        raise InputError(f"campaign folder {str(campaign_dir)!r} {state}; expected a folder holding "
                         f"{CONFIG_NAME}. Create one with `perftunereport campaign init {campaign_dir}`.")
    if not config_path.is_file():
        raise InputError(f"campaign folder {str(campaign_dir)!r} has no {CONFIG_NAME}; expected "
                         f"{config_path}. Create it with `perftunereport campaign init {campaign_dir}`.")
    raw = _read_yaml(config_path)
    if not isinstance(raw, Mapping):
        got = "an empty file" if raw is None else _show(raw)
        raise ConfigError(str(config_path), [
            f"(top level): expected a mapping with keys {', '.join(TOP_KEYS)}, got {got}. "
            f"Start from `perftunereport campaign init`."
        ])
    return _validate(raw, campaign_dir.resolve(), config_path, strict)


def _yaml_scalar(value: str) -> str:
    """Return value as a YAML scalar, double-quoted only when plain style would change its meaning."""
    try:
        plain_ok = "\n" not in value and yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain_ok = False
    return value if plain_ok else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def campaign_init(directory: Path, campaign_id: str | None = None, hardware: str = "h200_sm90") -> Path:
    """Write a commented directory/config.yaml scaffold that loads cleanly; never overwrite one."""
    directory = Path(directory)
    name = directory.resolve().name
    try:
        cid = check_id("campaign", campaign_id if campaign_id is not None else name)
    except IdError as exc:
        if campaign_id is not None:
            raise
        raise IdError(f"{exc.message} The id defaults to the folder name {name!r}; pass campaign_id "
                      f"(--id) to choose a valid one.") from exc
    if nonempty_text(hardware) or "\n" in hardware:
        raise InputError(f"campaign init: hardware must be a ceiling token such as 'h200_sm90', got "
                         f"{_show(hardware)}.")
    if hardware != capture_ceilings.FROM_CAPTURE and (unknown := unknown_hardware(hardware, None)):
        raise InputError(f"campaign init: {unknown}")
    config_path = directory / CONFIG_NAME
    if directory.exists() and not directory.is_dir():
        raise InputError(f"campaign init: {str(directory)!r} exists and is not a folder; pass a folder path.")
    if config_path.exists():
        raise InputError(f"{config_path} already exists; refusing to overwrite it. Edit it by hand and check "
                         f"it with `perftunereport campaign validate {directory}`, or pick a new folder.")
    template = resources.files("perfreport.config").joinpath("campaign_config.yaml.tmpl")
    text = Template(template.read_text(encoding="utf-8")).substitute(
        campaign_id=_yaml_scalar(cid), hardware=_yaml_scalar(hardware)
    )
    write_text_atomic(config_path, text)
    return config_path
