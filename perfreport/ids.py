"""Ids that become paths: campaign, cell and bundle ids."""

from __future__ import annotations

import re

from perfreport.errors import IdError

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_ID_RE = re.compile(rf"^{ID_PATTERN}$")


def is_valid_id(value: object) -> bool:
    """Return True when value is a string usable as one path component."""
    return isinstance(value, str) and bool(_ID_RE.fullmatch(value)) and value not in {".", ".."}


def check_id(kind: str, value: str) -> str:
    """Return value unchanged, or raise IdError explaining the allowed pattern."""
    if not is_valid_id(value):
        raise IdError(
            f"{kind} id {value!r} is not allowed: expected {ID_PATTERN} (letters, digits, '.', '_', '-'; "
            f"not starting with '.', '_' or '-'; no '/'), because ids become folder names. "
            f"Pick an id such as 'decode-bs16' or 'h200.tp1'."
        )
    return value
