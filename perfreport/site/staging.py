"""Swap a rendered site in whole: everything is written into a hidden staging folder first, then moved into place.

A render writes dozens of files; a full disk, a read-only folder or a kill half-way must not leave a site that
mixes new and old pages. The staging folder lives inside the site root (same file system, so every move is a
rename); each target is set aside until every move has succeeded, and any failure puts them all back. Hidden
folders (a name starting with '.') are never listed as campaigns.

A kill between setting a folder aside and moving its replacement in (two renames) leaves the old folder in the
staging folder's attic: the journal written before the moves names where each one belongs, and the next render's
Staging puts every set-aside folder whose place is empty back before it clears what the killed render left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

PREFIX = ".render-"
JOURNAL = "journal.json"  # in the attic: set-aside name -> the target path it came from (relative to the site)


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """Hard-link src at dst (no bytes copied, the old file untouched), or copy it where links are refused."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


class Staging:
    """A hidden folder in `site` collecting staged files and the targets they replace on commit()."""

    def __init__(self, site: Path, name: str) -> None:
        for stale in sorted(site.glob(f"{PREFIX}*")):  # left by a killed render: callers hold the site's lock
            if stale.is_dir() and not stale.is_symlink():
                _recover(site, stale / ".attic")
            shutil.rmtree(stale, ignore_errors=True)
        self._site = site
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
        journal = {str(i): os.path.relpath(dst, self._site) for i, (_, dst) in enumerate(self._moves)}
        (self._attic / JOURNAL).write_text(json.dumps(journal, sort_keys=True), encoding="utf-8")
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


def _recover(site: Path, attic: Path) -> None:
    """Put back every folder a killed commit set aside whose place is still empty (the journal says where); a
    place already filled holds the new tree, which carries the old one's kept files, and the attic copy goes."""
    try:
        journal = json.loads((attic / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # killed before the journal was written: nothing was moved yet
    if not isinstance(journal, dict):
        return
    for key, rel in sorted(journal.items()):
        backup, target = attic / str(key), (site / str(rel))
        if not isinstance(rel, str) or os.path.isabs(rel) or ".." in Path(rel).parts:
            continue  # a journal is ours; one naming a place outside the site is not followed
        if backup.is_dir() and not backup.is_symlink() and not target.exists() and not target.is_symlink():
            with contextlib.suppress(OSError):
                backup.rename(target)
