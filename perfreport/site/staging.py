"""Swap a rendered site in whole: everything is written into a hidden staging folder first, then moved into place.

A render writes dozens of files; a full disk, a read-only folder or a kill half-way must not leave a site that
mixes new and old pages. The staging folder lives inside the site root (same file system, so every move is a
rename); each target is set aside until every move has succeeded, and any failure puts them all back. Hidden
folders (a name starting with '.') are never listed as campaigns.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

PREFIX = ".render-"


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link src at dst (no bytes copied, the old file untouched), or copy it where links are refused."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


class Staging:
    """A hidden folder in `site` collecting staged files and the targets they replace on commit()."""

    def __init__(self, site: Path, name: str) -> None:
        for stale in site.glob(f"{PREFIX}*"):  # left by a killed render: callers hold the site's lock
            shutil.rmtree(stale, ignore_errors=True)
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-", dir=site))
        self._attic = self.root / ".attic"
        self._attic.mkdir()
        self._moves: list[tuple[Path, Path]] = []

    def add(self, staged: Path, target: Path) -> None:
        """Move `staged` (a file or folder under root) onto `target` at commit."""
        self._moves.append((staged, target))

    def commit(self) -> None:
        """Move every staged path onto its target; on any failure put every target back as it was."""
        undo: list[Callable[[], object]] = []
        try:
            for i, (src, dst) in enumerate(self._moves):
                if not dst.parent.is_dir():
                    dst.parent.mkdir()
                    undo.append(dst.parent.rmdir)
                backup = self._attic / str(i)
                if dst.is_dir() and not dst.is_symlink():  # a folder cannot be replaced in one rename: set aside
                    dst.rename(backup)
                    undo.append(partial(backup.rename, dst))
                    src.rename(dst)
                    undo.append(partial(dst.rename, src))
                elif dst.exists() or dst.is_symlink():  # a file is: keep a link to the old one for undo
                    link_or_copy(dst, backup)
                    os.replace(src, dst)
                    undo.append(partial(os.replace, backup, dst))
                else:
                    src.rename(dst)
                    undo.append(dst.unlink)
        except BaseException:
            for step in reversed(undo):
                with contextlib.suppress(OSError):
                    step()
            raise

    def discard(self) -> None:
        """Delete the staging folder and what commit() set aside."""
        shutil.rmtree(self.root, ignore_errors=True)
