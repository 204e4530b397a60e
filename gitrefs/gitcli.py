"""Running the real git CLI for the few operations whose definition IS git's behaviour.

The environment is scrubbed of variables that would redirect git to another repository, index
or object store, so a caller's own GIT_DIR / GIT_INDEX_FILE can never leak into a run's refs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitrefs.errors import GitCommandFailed

_REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
                "GIT_PREFIX", "GIT_REFLOG_ACTION", "GIT_QUARANTINE_PATH")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING}
    # Read-only commands must not refresh (rewrite) the user's index as a side effect.
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def run_git(cwd: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None,
            check: bool = True, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``git -C cwd args`` and return the completed process (bytes out)."""
    proc = subprocess.run(["git", "-C", str(cwd), *args], env=git_env(env), capture_output=True,
                          input=input_bytes)
    if check:
        _check(proc, args)
    return proc


def _check(proc: subprocess.CompletedProcess[bytes], args: Sequence[str]) -> None:
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = err[-1] if err else f"exit status {proc.returncode}"
        raise GitCommandFailed(f"git {args[0]} failed: {detail}")


class GitProcess:
    """A git command started now and waited for later (``wait``), so the caller can work meanwhile."""

    def __init__(self, cwd: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        self.args = list(args)
        self._proc = subprocess.Popen(["git", "-C", str(cwd), *args], env=git_env(env), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait(self, *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        out, err = self._proc.communicate()
        done = subprocess.CompletedProcess(self._proc.args, self._proc.returncode, out, err)
        if check:
            _check(done, self.args)
        return done


def git_out(cwd: Path, args: Sequence[str], **kw: object) -> str:
    out = run_git(cwd, args, **kw).stdout  # type: ignore[arg-type]
    return out.decode("utf-8", "surrogateescape").strip()
