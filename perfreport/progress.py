"""The progress callback every long stage takes: one line of text per step, shown on stderr by the CLI."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]
