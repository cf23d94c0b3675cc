"""Read .ncu-rep (and gzipped .ncu-rep.gz) files with NVIDIA's ncu_report module; no GPU needed."""

from __future__ import annotations

import gzip
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from perfreport.atomic import sha256_file
from perfreport.errors import InputError
from perfreport.ncu.catalog import load_catalog
from perfreport.ncu.model import Capture, KernelLaunch, Rule
from perfreport.ncu.names import function_name
from perfreport.ncu.read import Progress
from perfreport.ncu.sets import infer_section_set

MAGIC = b"NVR\x00"
_VERSION_RE = re.compile(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?) \(build \d+\)")
_CMDLINE_RE = re.compile(rb"/[!-~]*/ncu ")


@contextmanager
def _plain_report(path: Path) -> Iterator[Path]:
    """Yield a path ncu_report can open: gunzip .gz files into a temp folder first."""
    if path.suffix != ".gz":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="perfreport-rep-") as tmp:
        out = Path(tmp) / path.name[: -len(".gz")]
        try:
            with gzip.open(path, "rb") as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"report '{path}': cannot gunzip it ({exc}). Expected a gzip-compressed .ncu-rep; "
                f"re-compress the original report with `gzip -k R.ncu-rep` or pass the .ncu-rep itself."
            ) from exc
        yield out


def _varint_string(data: bytes, start: int) -> str | None:
    """Decode the protobuf string at `start` from the length varint just before it (1 or 2 bytes)."""
    candidates = []
    if start >= 2 and data[start - 2] & 0x80 and not data[start - 1] & 0x80:
        candidates.append((data[start - 2] & 0x7F) | (data[start - 1] << 7))
    if start >= 1 and not data[start - 1] & 0x80:
        candidates.append(data[start - 1])
    for length in candidates:
        text = data[start : start + length]
        if len(text) == length and all(32 <= c < 127 for c in text):
            return text.decode()
    return None


def _session_facts(path: Path) -> tuple[str | None, str | None]:
    """ncu version and command line, stored as strings in the report's session record."""
    version = cmdline = None
    chunk, overlap, offset = 8 << 20, 4096, 0
    with path.open("rb") as fh:
        while version is None or cmdline is None:
            fh.seek(max(0, offset - overlap))
            data = fh.read(chunk + overlap)
            if not data:
                break
            if version is None and (v := _VERSION_RE.search(data)):
                version = v.group(1).decode()
            if cmdline is None and (c := _CMDLINE_RE.search(data)):
                full = _varint_string(data, c.start())
                if full is not None:
                    exe, _, args = full.partition("/ncu ")
                    cmdline = "ncu " + args.strip()
            offset += chunk
            if len(data) < chunk:
                break
    return version, cmdline


def _launch(act: Any, index: int, needed: list[str]) -> KernelLaunch:
    import ncu_report

    metrics: dict[str, float] = {}
    units: dict[str, str] = {}
    text: dict[str, str] = {}
    for name in needed:
        m = act.metric_by_name(name)
        if m is None or not m.has_value():
            continue
        value = m.value()
        if isinstance(value, str):
            text[name] = value
        elif value is not None:
            metrics[name] = float(value)
            units[name] = m.unit()

    def attr(name: str) -> str:
        m = act.metric_by_name(name)
        return "" if m is None or m.value() is None else str(m.value())

    demangled = act.name(ncu_report.IAction.NameBase_DEMANGLED)
    grid = tuple(attr(f"launch__grid_dim_{a}") for a in "xyz")
    block = tuple(attr(f"launch__block_dim_{a}") for a in "xyz")
    rules = [
        Rule(str(r.get("section_identifier", "")), str(r.get("rule_identifier", "")),
             str((r.get("rule_message") or {}).get("type", "")), str((r.get("rule_message") or {}).get("message", "")))
        for r in act.rule_results_as_dicts()
    ]
    return KernelLaunch(
        launch_id=index,
        name=demangled,
        function=act.name(ncu_report.IAction.NameBase_FUNCTION) or function_name(demangled),
        mangled=act.name(ncu_report.IAction.NameBase_MANGLED) or None,
        process_id=attr("launch__process_id") if act.metric_by_name("launch__process_id") else "",
        context=attr("launch__context_id"),
        stream=attr("launch__stream_id"),
        device=attr("launch__device_id"),
        cc=_cc(act),
        block_size=f"({', '.join(block)})" if all(block) else "",
        grid_size=f"({', '.join(grid)})" if all(grid) else "",
        metrics=metrics,
        units=units,
        text=text,
        rules=rules,
    )


def _cc(act: Any) -> str:
    major = act.metric_by_name("device__attribute_compute_capability_major")
    minor = act.metric_by_name("device__attribute_compute_capability_minor")
    if major is None or minor is None:
        return ""
    return f"{major.value()}.{minor.value()}"


PROGRESS_MIN_KERNELS = 20  # smaller reports load in well under a second: no progress lines


def progress_steps(total: int, parts: int = 10) -> set[int]:
    """The counts (1-based) after which progress is reported: about every tenth, and the last; none when small."""
    if total < PROGRESS_MIN_KERNELS:
        return set()
    step = -(-total // parts)
    return {*range(step, total, step), total}


def read_rep(path: Path, progress: Progress | None = None) -> Capture:
    """Read every kernel action of a .ncu-rep[.gz] into a Capture (base units, full precision).

    `progress` gets "NAME: k/N kernels read" about every tenth of a report of 20 kernels or more.
    """
    try:
        import ncu_report
    except ImportError as exc:  # pragma: no cover - dependency is declared
        raise InputError(
            f"report '{path}': the `ncu-report` package is not installed; run `pip install ncu-report`."
        ) from exc
    sha = sha256_file(path)
    with _plain_report(path) as plain:
        with plain.open("rb") as fh:
            head = fh.read(4)  # the magic only (the report can be hundreds of MB)
        if head != MAGIC:
            raise InputError(
                f"report '{path}': not an Nsight Compute report (first bytes {head!r}, expected {MAGIC!r}). "
                f"Pass the file written by `ncu -o NAME` (NAME.ncu-rep), or an ncu CSV export."
            )
        version, cmdline = _session_facts(plain)
        try:
            ctx = ncu_report.load_report(str(plain))
        except Exception as exc:  # ncu_report raises plain RuntimeError/FileNotFoundError
            raise InputError(f"report '{path}': ncu_report could not load it: {exc}") from exc
        needed = load_catalog().needed()
        launches: list[KernelLaunch] = []
        sections: set[str] = set()
        ranges = [ctx.range_by_idx(r) for r in range(ctx.num_ranges())]
        total = sum(rng.num_actions() for rng in ranges)
        report_at = progress_steps(total) if progress is not None else set()
        for rng in ranges:
            for i in range(rng.num_actions()):
                act = rng.action_by_idx(i)
                if not act.name(ncu_report.IAction.NameBase_DEMANGLED):
                    raise InputError(
                        f"report '{path}': kernel #{len(launches)} has no name: the file is truncated or damaged "
                        f"({path.stat().st_size} bytes). Copy the report again after ncu prints '==PROF== Report:'."
                    )
                launches.append(_launch(act, len(launches), needed))
                sections.update(s.identifier() for s in act.sections())
                if progress is not None and len(launches) in report_at:
                    progress(f"{path.name}: {len(launches)}/{total} kernels read")
    if not launches:
        raise InputError(
            f"report '{path}': holds no profiled kernel ({path.stat().st_size} bytes): the file is truncated, "
            f"was copied while ncu was still writing it, or the capture matched no kernel. Re-copy the "
            f"report after ncu prints '==PROF== Report:', or re-capture with a --kernel-name that matches."
        )
    gpu = next((k.text.get(load_catalog().text["gpu"]) for k in launches if k.text), None)
    return Capture(
        source_path=str(path),
        source_format="ncu-rep",
        sha256=sha,
        ncu_version=version,
        gpu=gpu,
        section_set=infer_section_set(sorted(sections), cmdline),
        sections=sorted(sections),
        launches=launches,
        command_line=cmdline,
    )
