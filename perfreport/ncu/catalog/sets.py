"""Which ncu section set a capture used: from its command line, else from the sections it shows.

The sets and sections are the `section_sets` and `sections` tables of metrics.yaml. A report lists every section
it collected; a CSV page shows only some: the details page the sections with header metrics (by display name),
the raw page those with a marker metric. So a set matches when the sections of it that the source can show are
present (less the optional ones) and no other section of the table that the source can show is.

Sets changed with ncu versions (metrics.yaml `section_sets_before`: 2020.3's full had 13 sections, basic had no
WorkloadDistribution before 2024.1): a capture is matched against its own ncu version's sets (`ncu_version`);
with no version known, a report against every version's, largest set first, so a full report is never called
basic (a CSV page, showing only some sections, against the newest's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from perfreport.ncu.catalog.metrics import metrics_yaml

_SET_ARG = re.compile(r"--set[ =](\S+)")
_ORDER = ("full", "detailed", "roofline", "basic")  # largest first: a full report holds every other set


@dataclass(frozen=True)
class SectionTable:
    """The section sets and how each section shows on a CSV page."""

    sets: dict[str, frozenset[str]]  # set -> section identifiers (the newest ncu's)
    optional: frozenset[str]  # sections a set matches without
    display: dict[str, str]  # details-page display name -> identifier
    header: frozenset[str]  # sections the details page shows with header metrics
    marker: dict[str, str]  # raw metric -> the section it marks on a raw page
    versions: tuple[tuple[tuple[int, ...], dict[str, frozenset[str]]], ...] = ()  # (since, sets), oldest first


@lru_cache(maxsize=1)
def section_table() -> SectionTable:
    """Load the section tables of metrics.yaml once."""
    raw = metrics_yaml()
    sections: dict[str, dict[str, object]] = raw["sections"]
    return SectionTable(
        sets={name: frozenset(ids) for name, ids in raw["section_sets"].items()},
        optional=frozenset(raw["section_sets_optional"]),
        display={str(spec["display"]): sid for sid, spec in sections.items()},
        header=frozenset(sid for sid, spec in sections.items() if spec["header"]),
        marker={str(spec["marker"]): sid for sid, spec in sections.items() if spec.get("marker")},
        versions=_versions(raw),
    )


def _versions(raw: dict[str, Any]) -> tuple[tuple[tuple[int, ...], dict[str, frozenset[str]]], ...]:
    newest = {name: frozenset(ids) for name, ids in raw["section_sets"].items()}
    out = []
    for entry in raw.get("section_sets_before", []):
        since = _version_key(str(entry["since"]))
        if since is None:
            raise ValueError(f"metrics.yaml section_sets_before: since {entry['since']!r} is not a version")
        out.append((since, {k: frozenset(v) for k, v in entry.items() if k != "since"}))
    out.append((_NEWEST, newest))
    out.sort(key=lambda e: e[0])
    return tuple(out)


_NEWEST = (2025, 1)  # `section_sets` holds from this ncu version on


def _version_key(version: str | None) -> tuple[int, ...] | None:
    """'2022.4.0.0' -> (2022, 4, 0, 0); None when it is not a dotted version."""
    m = re.match(r"\s*(\d{4})\.(\d+)((?:\.\d+)*)", version or "")
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)), *(int(x) for x in m.group(3).split(".") if x))


def sets_for_version(ncu_version: str | None) -> list[dict[str, frozenset[str]]]:
    """The set tables a capture of this ncu version is matched against: its own version's (an older version than
    the oldest listed takes the oldest), or every version's, newest first, when the version is not known."""
    versions = section_table().versions
    key = _version_key(ncu_version)
    if key is None:
        return [sets for _, sets in reversed(versions)]
    own = versions[0][1]
    for since, sets in versions:
        if since <= key:
            own = sets
    return [own]


def display_name(section: str) -> str:
    """Return the details-page name of a section identifier (rule rows print identifiers); others unchanged."""
    return _display_of().get(section, section)


@lru_cache(maxsize=1)
def _display_of() -> dict[str, str]:
    return {sid: name for name, sid in section_table().display.items()}


def infer_section_set(sections: Iterable[str] = (), command_line: str | None = None, *,
                      metrics: Iterable[str] | None = None, displayed: Iterable[str] | None = None,
                      ncu_version: str | None = None) -> str | None:
    """Return the set ('full', 'detailed', 'roofline', 'basic') a capture used.

    Give a report's section identifiers (`sections`, unmatched: 'custom'), a raw page's metric columns (`metrics`)
    or a details page's section names (`displayed`); a page that matches no set gives None, as it shows too
    little to call the capture custom. None when nothing is known. `ncu_version` (the capture's, e.g.
    '2022.4.0.0') picks that version's sets; without it every version's are tried.
    """
    if command_line:
        m = _SET_ARG.search(command_line)
        if m:
            return m.group(1)
    table = section_table()
    tables = sets_for_version(ncu_version)
    if ncu_version is None and (metrics is not None or displayed is not None):
        tables = tables[:1]  # a page shows too little to try older sets on (SpeedOfLight alone: 2023's roofline)
    known = frozenset(table.display.values()).union(*(m for sets in tables for m in sets.values()))
    if metrics is not None:
        have = {table.marker[m] for m in metrics if m in table.marker}
        shown, unmatched = frozenset(table.marker.values()), None
    elif displayed is not None:
        have = {table.display[d] for d in displayed if d in table.display}
        shown, unmatched = table.header, None
    else:
        have = set(sections)
        if not have:
            return None
        shown, unmatched = known, "custom"
    have &= shown
    for name in _ORDER:
        for sets in tables:
            members = sets.get(name)
            if members is not None and (members - table.optional) & shown <= have and not (have & known) - members:
                return name
    return unmatched
