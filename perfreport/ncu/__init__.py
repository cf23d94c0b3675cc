"""Stage 2: read ncu exports (.ncu-rep, raw CSV, details CSV) into one tidy model, then derive."""

from __future__ import annotations

from perfreport.ncu.model import Capture, KernelLaunch

__all__ = ["Capture", "KernelLaunch"]
