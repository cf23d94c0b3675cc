"""File plumbing shared by every stage: atomic deterministic writes, content digests."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to path via a temp file + rename so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def dumps_json(data: Any) -> str:
    """Serialize deterministically: sorted keys, no NaN, trailing newline.

    A top-level object gets one key per line and one line per record of its lists of objects (one kernel per
    line: diffs stay readable, and json's C encoder is used, which `indent` would turn off; docs/benchmarks.md).
    """
    if not isinstance(data, dict):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    parts = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            body = ",\n".join(f"    {_compact(v)}" for v in value)
            parts.append(f"  {_compact(key)}: [\n{body}\n  ]")
        else:
            parts.append(f"  {_compact(key)}: {_compact(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write data as deterministic JSON atomically."""
    write_text_atomic(path, dumps_json(data))


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (provenance of every imported source)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
