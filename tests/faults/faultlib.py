"""Helpers of the fault tests: full-tree hashes, store snapshots, a CLI wrapper, a run template.

A template is a directory holding a workspace and a store as a run left them; each trial copies
it back to the SAME absolute path (run documents and snapshot stores record absolute paths), so
every trial starts from byte-identical state.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..conftest import cli_json as root_cli_json
from ..conftest import restore_template, run_cli, save_template

__all__ = ["restore_template", "save_template"]  # (their home is tests/conftest.py)


def tree_hash(root: Path, *, skip: tuple[str, ...] = ()) -> str:
    """One hash over every path under ``root``: its relative name, full st_mode (type and
    permission bits), and content (files) or target (symlinks). Names are compared as bytes."""
    h = hashlib.sha256()
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, base)
        if rel_dir != b"." and any(rel_dir == s.encode() or rel_dir.startswith(s.encode() + b"/") for s in skip):
            dirnames[:] = []
            continue
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, base)
            if rel in {s.encode() for s in skip}:
                continue
            st = os.lstat(full)
            h.update(rel + b"\0" + str(st.st_mode).encode() + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
            h.update(b"\1")
    return h.hexdigest()


def tree_files(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every non-directory path -> (st_mode, content or link target): for a readable diff."""
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = Path(dirpath) / name
            st = full.lstat()
            data = os.fsencode(os.readlink(full)) if full.is_symlink() else full.read_bytes()
            out[str(full.relative_to(root))] = (st.st_mode, data)
    return out


def store_hash(store: Path) -> str:
    """The run store, byte for byte (the execution lock's owner record included)."""
    return tree_hash(store)


def cli(cwd: Path, store: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, store=store, env=env, timeout=600)


def cli_json(cwd: Path, store: Path, *args: str) -> dict:
    return root_cli_json(*args, cwd=cwd, store=store, timeout=600)


@contextmanager
def fast_dir(fallback: Path) -> Iterator[Path]:
    """A directory on tmpfs when there is one (as tests/resume/test_resume_crash.py does): still
    real files and real renames, but a restore's or capture's filesystem sync does not wait for
    every other writer of a shared disk. ``fallback`` otherwise."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    root = Path(tempfile.mkdtemp(prefix="iterion-faults-", dir=shm))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]
