"""Which ncu section set a capture used: from its command line, else from the sections it shows.

The sets and sections are the `section_sets` and `sections` tables of metrics.yaml. A report lists every section
it collected; a CSV page shows only some: the details page the sections with header metrics (by display name),
the raw page those with a marker metric. So a set matches when the sections of it that the source can show are
present (less the optional ones) and no other section of the table that the source can show is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from perfreport.ncu.catalog.metrics import metrics_yaml

_SET_ARG = re.compile(r"--set[ =](\S+)")
_ORDER = ("full", "detailed", "roofline", "basic")  # largest first: a full report holds every other set


@dataclass(frozen=True)
class SectionTable:
    """The section sets and how each section shows on a CSV page."""

    sets: dict[str, frozenset[str]]  # set -> section identifiers
    optional: frozenset[str]  # sections a set matches without
    display: dict[str, str]  # details-page display name -> identifier
    header: frozenset[str]  # sections the details page shows with header metrics
    marker: dict[str, str]  # raw metric -> the section it marks on a raw page


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
    )


def display_name(section: str) -> str:
    """Return the details-page name of a section identifier (rule rows print identifiers); others unchanged."""
    return _display_of().get(section, section)


@lru_cache(maxsize=1)
def _display_of() -> dict[str, str]:
    return {sid: name for name, sid in section_table().display.items()}


def infer_section_set(sections: Iterable[str] = (), command_line: str | None = None, *,
                      metrics: Iterable[str] | None = None, displayed: Iterable[str] | None = None) -> str | None:
    """Return the set ('full', 'detailed', 'roofline', 'basic') a capture used.

    Give a report's section identifiers (`sections`, unmatched: 'custom'), a raw page's metric columns (`metrics`)
    or a details page's section names (`displayed`); a page that matches no set gives None, as it shows too
    little to call the capture custom. None when nothing is known.
    """
    if command_line:
        m = _SET_ARG.search(command_line)
        if m:
            return m.group(1)
    table = section_table()
    known = frozenset(table.display.values())
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
        members = table.sets[name]
        if (members - table.optional) & shown <= have and not (have & known) - members:
            return name
    return unmatched
