"""The YAML loader for files we parse on every import: PyYAML's safe loader, on libyaml when PyYAML has it.

`CSafeLoader` is the same safe constructor and resolver with libyaml's C scanner and parser: the same documents,
types and error classes, an order of magnitude faster on the files every import reads (docs/benchmarks.md).
"""

from __future__ import annotations

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
