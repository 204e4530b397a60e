"""Subprocess helpers for the store tests: real processes racing on a real store directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    """Run ``code`` in a fresh interpreter (argv[1:] = args)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def wait_for(path: Path, timeout: float = 30.0) -> None:
    """Block until ``path`` exists (a child's readiness signal)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.01)
