"""Thin click layer for stage 1 (`perftunereport capture ...`); registered on the main group in cli.py."""

from __future__ import annotations

import click


@click.group(name="capture")
def capture_group() -> None:
    """Plan, check, run and diagnose scoped ncu captures (docs/capture.md)."""


@capture_group.group(name="k8s")
def k8s_group() -> None:
    """Capture from a Kubernetes pod: kubectl debug sidecar or a sister deployment (docs/capture.md)."""
