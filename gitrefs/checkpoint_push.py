"""Pushing one commit to a remote under a run's checkpoint ref: the one git push every caller uses.

``iterion refs push`` (``RunRefs.push``) and the engine's automatic workspace-checkpoint pushes
(``iterion.engine.checkpoint_push``) both go through :func:`push_commit`, so the command line,
the error text and the time limit are the same everywhere.

The push is forced (``+commit:ref``): a checkpoint ref belongs to one run and one sequence
number, and a number is only ever reused when an earlier attempt under it was never recorded (a
process killed mid-push), in which case overwriting it is exactly right. The push never prompts
(no terminal, ssh in batch mode) and is bounded in time (``ITERION_PUSH_TIMEOUT_S``, default
120 s): a remote that hangs fails the push, never the run.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitrefs.gitcli import git_env
from gitrefs.persist.envsettings import env_seconds

TIMEOUT_ENV = "ITERION_PUSH_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0


def push_timeout_s() -> float:
    """``$ITERION_PUSH_TIMEOUT_S`` seconds (> 0), else 120; EnvSettingError on garbage (a typo must
    not silently become the default: the user asked for another limit)."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, zero_ok=False)


@dataclass(frozen=True)
class PushOutcome:
    ok: bool
    error: str | None = None  # one line: git's reason (a hook's words, "rejected") then its summary


def push_commit(workdir: Path, remote: str, commit: str, ref: str, *, force: bool = True,
                timeout_s: float | None = None) -> PushOutcome:
    """``git push REMOTE [+]COMMIT:REF`` from ``workdir``; never raises for a failed push (a garbage
    ``$ITERION_PUSH_TIMEOUT_S`` is a refusal before any push: EnvSettingError)."""
    limit = push_timeout_s() if timeout_s is None else timeout_s
    env = git_env()
    # never wait for a password or a host-key question: nobody is there to answer
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    spec = f"{'+' if force else ''}{commit}:{ref}"
    try:
        proc = subprocess.run(["git", "-C", str(workdir), "push", "--no-verify", "--quiet", "--", remote, spec],
                              check=False, env=env, capture_output=True, timeout=limit,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return PushOutcome(False, f"git push to {remote} did not finish within {limit:g} s "
                                  "(ITERION_PUSH_TIMEOUT_S)")
    except OSError as exc:
        return PushOutcome(False, f"git push could not start: {exc}")
    if proc.returncode == 0:
        return PushOutcome(True)
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return PushOutcome(False, "; ".join(lines)[:500] if lines else f"git push exited {proc.returncode}")
