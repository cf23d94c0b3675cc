"""The YAML loader for files we parse on every import: PyYAML's safe loader, on libyaml when PyYAML has it.

`CSafeLoader` is the same safe constructor and resolver with libyaml's C scanner and parser: ~10x faster on
sol-ceilings.yaml (0.04 s -> 0.004 s per import here) and the same documents, types and error classes.
"""

from __future__ import annotations

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
