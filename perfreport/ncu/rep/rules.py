"""Rule results of a .ncu-rep (field 19 of a ProfileResult), as ncu_report's rule_results_as_dicts lists them."""

from __future__ import annotations

from struct import unpack_from

from perfreport.ncu.model import Rule, speedup_text
from perfreport.ncu.rep.proto import (
    I64,
    LEN,
    RULE_BODY,
    RULE_BODY_ITEMS,
    RULE_IDENTIFIER,
    RULE_ITEM_MESSAGE,
    RULE_ITEM_SPEEDUP,
    RULE_MESSAGE_TEXT,
    RULE_MESSAGE_TYPE,
    RULE_SECTION_IDENTIFIER,
    RULE_SPEEDUP_TYPE,
    RULE_SPEEDUP_VALUE,
    VARINT,
    ReportBytes,
    UnknownLayout,
    field_text,
    key,
    read_varint,
    skip_field,
)

# The file stores a rule message's type as a bit (1 ok, 2 warning, 4 optimization) or 3 (error: a rule whose
# metrics were not collected, wild/sglang-h800); ncu_report's MsgType numbers them 1 OK, 2 OPTIMIZATION,
# 3 WARNING, 4 ERROR. Only the values seen in real reports are mapped.
MSG_TYPES = {0: "0", 1: "1", 2: "3", 3: "4", 4: "2"}
# An estimated speedup's type as stored and as ncu_report and the details page name it.
SPEEDUP_TYPES = {1: "local", 2: "global"}

_IDENTIFIER_TAG, _BODY_TAG = key(RULE_IDENTIFIER, LEN), key(RULE_BODY, LEN)
_SECTION_TAG, _ITEM_TAG = key(RULE_SECTION_IDENTIFIER, LEN), key(RULE_BODY_ITEMS, LEN)
_MESSAGE_TAG = key(RULE_ITEM_MESSAGE, LEN)
_STRING_OR_BODY = frozenset({_IDENTIFIER_TAG, _SECTION_TAG, _BODY_TAG})
_TEXT_TAG, _TYPE_TAG = key(RULE_MESSAGE_TEXT, LEN), key(RULE_MESSAGE_TYPE, VARINT)
_SPEEDUP_TAG = key(RULE_ITEM_SPEEDUP, LEN)
_SPEEDUP_TYPE_TAG, _SPEEDUP_VALUE_TAG = key(RULE_SPEEDUP_TYPE, VARINT), key(RULE_SPEEDUP_VALUE, I64)


def read_rules(b: ReportBytes, span: tuple[int, int], out: list[Rule]) -> None:
    """One RuleResult: a Rule per item of its body, in order (as ncu_report's rule_results_as_dicts lists them).

    An item holds at most one message (1: text, 2: type) and one estimated speedup besides focus metrics and
    tables; an item
    without a message is listed too, with type NONE and no text (ncu_report does the same). Plain loops, not
    iter_fields: a 150-launch report holds ~260 distinct rule results of ~500 bytes.
    """
    p, end = span
    ident = section = ""
    items: list[tuple[str, str, str, str]] = []
    while p < end:
        tag, p = read_varint(b, p)
        if tag in _STRING_OR_BODY:
            n, p = read_varint(b, p)
            if tag == _BODY_TAG:
                q, stop = p, p + n
                while q < stop:  # the body: its items (field 1), each one message at most
                    k1, q = read_varint(b, q)
                    if k1 == _ITEM_TAG:
                        n1, q = read_varint(b, q)
                        items.append(_message(b, q, q + n1))
                        q += n1
                    else:
                        q = skip_field(b, q, k1)
                if q != stop:
                    raise UnknownLayout(f"rule body ends at byte {q}, its size says {stop}")
            elif tag == _IDENTIFIER_TAG:
                ident = field_text(b, (p, p + n))
            else:
                section = field_text(b, (p, p + n))
            p += n
        else:
            p = skip_field(b, p, tag)
    if p != end:
        raise UnknownLayout(f"rule result ends at byte {p}, its size says {end}")
    out.extend(Rule(section, ident, *item) for item in items)


def _speedup(b: ReportBytes, p: int, end: int) -> tuple[str, str]:
    """(type, value) of an item's estimated speedup b[p:end] (1: type, 2: value in %, a double)."""
    kind, value = "", ""
    while p < end:
        tag, p = read_varint(b, p)
        if tag == _SPEEDUP_TYPE_TAG:
            v, p = read_varint(b, p)
            if v not in SPEEDUP_TYPES:
                raise UnknownLayout(f"rule speedup type {v} at byte {p}")
            kind = SPEEDUP_TYPES[v]
        elif tag == _SPEEDUP_VALUE_TAG and p + 8 <= end:
            value = speedup_text(unpack_from("<d", b, p)[0])
            p += 8
        else:
            p = skip_field(b, p, tag)
    if p != end:
        raise UnknownLayout(f"rule speedup ends at byte {p}, its size says {end}")
    return kind, value


def _message(b: ReportBytes, p: int, end: int) -> tuple[str, str, str, str]:
    """(type, text, speedup type, speedup) of a rule item b[p:end]: its message (field 1: 1 text, 2 type), if it
    has one, and its estimated speedup (field 10), if it has one."""
    kind, text = "0", ""  # a message that stores no type is NONE (the proto default), as ncu_report says
    speedup = ("", "")
    while p < end:
        tag, p = read_varint(b, p)
        if tag == _SPEEDUP_TAG:
            n, p = read_varint(b, p)
            speedup = _speedup(b, p, p + n)
            p += n
            continue
        if tag != _MESSAGE_TAG:
            p = skip_field(b, p, tag)
            continue
        n, p = read_varint(b, p)
        q, stop = p, p + n
        p = stop
        while q < stop:
            k3, q = read_varint(b, q)
            if k3 == _TEXT_TAG:
                n3, q = read_varint(b, q)
                text = field_text(b, (q, q + n3))
                q += n3
            elif k3 == _TYPE_TAG:
                v3, q = read_varint(b, q)
                known = MSG_TYPES.get(v3)
                if known is None:
                    raise UnknownLayout(f"rule message type {v3} at byte {q}")
                kind = known
            else:
                q = skip_field(b, q, k3)
        if q != stop:
            raise UnknownLayout(f"rule message ends at byte {q}, its size says {stop}")
    if p != end:
        raise UnknownLayout(f"rule item ends at byte {p}, its size says {end}")
    return kind, text, *speedup
