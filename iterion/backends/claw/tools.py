"""The claw agent's workspace tools. Every path is confined to the workspace and checked against
the protected defaults by ``iterion.backends.claw.paths`` (resolved before any rule; refused, as a
tool error the model sees, when it lands outside). grep/glob/list_dir skip protected entries
silently, never follow a symlink, and stop at ``$ITERION_CLAW_TOOL_TIMEOUT`` (grep's regular
expression runs with that timeout too).

A tool error is returned to the model (it can correct itself); it never fails the node. What
runs a shell command (``bash``) is injected by the engine (process group, timeout, cancel).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterion.backends.claw.paths import PathRefused, Resolved, Resolver, open_checked
from iterion.backends.claw.wire import ToolSpec
from iterion.permissions import PATH_TOOLS, path_glob

READ_CAP = 256 * 1024          # bytes of a file read_file returns
OUTPUT_CAP = 32 * 1024         # bytes of bash output kept (head and tail)
LIST_CAP = 1000                # entries of list_dir / glob
GREP_CAP = 500                 # matching lines of grep
GREP_FILE_CAP = 4 * 1024 * 1024  # bytes of each file grep reads
EDIT_CAP = 16 * 1024 * 1024      # bytes of a file edit_file loads
BASH_TIMEOUT_S = 120.0
BASH_MAX_TIMEOUT_S = 1800.0
WALK_TIMEOUT_ENV, WALK_TIMEOUT_S = "ITERION_CLAW_TOOL_TIMEOUT", 30.0  # each grep/glob/list_dir call
WRITE_TOOLS = frozenset({"write_file", "edit_file"})


class ToolError(Exception):
    """A refusal or failure the model sees as the tool's result (``is_error``)."""


@dataclass(frozen=True)
class ShellResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


# (command, cwd, timeout_s) -> ShellResult; kills the process group on timeout or cancel
RunShell = Callable[[str, Path, float], ShellResult]


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_S = {"type": "string"}
BUILTIN_SPECS: dict[str, ToolSpec] = {t.name: t for t in (
    ToolSpec("read_file", "Read a UTF-8 text file of the workspace.", _obj({"path": _S}, ["path"])),
    ToolSpec("write_file", "Create or overwrite a file of the workspace with the given content.",
             _obj({"path": _S, "content": _S}, ["path", "content"])),
    ToolSpec("edit_file", "Replace one exact, unique occurrence of `old` by `new` in a file of the workspace.",
             _obj({"path": _S, "old": _S, "new": _S}, ["path", "old", "new"])),
    ToolSpec("list_dir", "List a directory of the workspace (directories end with /).", _obj({"path": _S}, [])),
    ToolSpec("glob", "Workspace paths matching a glob pattern (** crosses directories).",
             _obj({"pattern": _S}, ["pattern"])),
    ToolSpec("grep", "Lines matching a regular expression, as path:line:text, in a file or directory.",
             _obj({"pattern": _S, "path": _S}, ["pattern"])),
    ToolSpec("bash", "Run a shell command in the workspace (timeout in seconds, default 120).",
             _obj({"command": _S, "timeout_s": {"type": "number"}}, ["command"])),
    ToolSpec("ask_user", "Ask the user a question and wait for the answer.", _obj({"question": _S}, ["question"])),
)}
WORKSPACE_TOOLS = ("read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "bash")


class Workspace:
    """The tools over one workspace. ``protected_dirs``: directories the protected defaults add
    (the run store); ``may_read(tool, rel)``: whether the policy lets a walk read a file (grep
    over a directory skips a file a rule denies); ``timeout_s``: each grep/glob/list_dir call's
    limit."""

    def __init__(self, root: Path, run_shell: RunShell | None = None, *, protected_dirs: tuple[Path, ...] = (),
                 may_read: Callable[[str, str], bool] | None = None, timeout_s: float = WALK_TIMEOUT_S) -> None:
        self.paths = Resolver(root, protected_dirs)
        self.root = self.paths.root
        self.run_shell = run_shell
        self.may_read = may_read
        self.timeout_s = timeout_s
        self._decided: str | None = None  # the path the policy decided on, during call()

    # -- confinement ------------------------------------------------------------------------------
    def target(self, name: str, args: dict[str, Any]) -> Resolved | None:
        """The resolved path argument of a file tool (None for a tool without one); raises
        ToolError for a path refused before any rule."""
        if name not in PATH_TOOLS:
            return None
        raw = args.get("path")
        if name in ("list_dir", "grep") and raw in (None, ""):
            raw = "."  # their path is optional: the workspace
        try:
            return self.paths.resolve(raw, write=name in WRITE_TOOLS)
        except PathRefused as exc:
            raise ToolError(str(exc)) from None

    def rel(self, p: Path) -> str:
        return self.paths.rel(p)

    def _checked(self, path: str, write: bool, unlocked: bool) -> Resolved:
        try:
            res = self.paths.resolve(path, write=write)
        except PathRefused as exc:
            raise ToolError(str(exc)) from None
        if self._decided is not None and res.rel != self._decided:
            raise ToolError(f"{path!r} now resolves to {res.rel!r}, not {self._decided!r} as when it was allowed "
                            "(a symlink changed); call the tool again")
        if res.protected and not unlocked:
            raise ToolError(f"{path!r} is protected ({res.protected}); a permission rule naming the path "
                            "must allow it")
        return res

    def _open(self, res: Resolved, flags: int) -> int:
        try:
            return open_checked(res, flags)
        except PathRefused as exc:
            raise ToolError(str(exc)) from None

    def _deadline(self, tool: str) -> Callable[[], None]:
        end = time.monotonic() + self.timeout_s

        def tick() -> None:
            if time.monotonic() > end:
                raise ToolError(f"{tool} stopped after {self.timeout_s:g}s (${WALK_TIMEOUT_ENV}); narrow the path "
                                "or the pattern")
        return tick

    # -- the tools --------------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any], *, unlocked: bool = False, decided: str | None = None) -> str:
        """Run a tool. ``unlocked``: a rule naming the path allowed a protected one (the loop
        decided it); a special file or a path outside the workspace stays refused. ``decided``:
        the canonical path the policy decided on; the call is refused if the path now resolves
        elsewhere."""
        fn = getattr(self, f"t_{name}", None)
        if fn is None:
            raise ToolError(f"unknown tool {name!r}")
        params = fn.__code__.co_varnames[1:fn.__code__.co_argcount]
        required = params[:len(params) - len(fn.__defaults__ or ())]
        missing = [p for p in required if p not in args]
        if missing:
            raise ToolError(f"{name} needs argument {missing[0]!r} (arguments: {', '.join(params)})")
        kw = dict(_only(args, params, name))
        if name in PATH_TOOLS:
            kw["unlocked"] = unlocked
        self._decided = decided
        try:
            result: str = fn(**kw)
        finally:
            self._decided = None
        return result

    def t_read_file(self, path: str, *, unlocked: bool = False) -> str:
        res = self._checked(path, False, unlocked)
        if res.real.is_dir():
            raise ToolError(f"{path!r} is a directory")
        if not res.real.exists():
            raise ToolError(f"{path!r} is not a file that exists")
        fd = self._open(res, os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(READ_CAP + 1)
        text = data[:READ_CAP].decode("utf-8", "replace")
        if len(data) > READ_CAP:
            text += f"\n[... truncated at {READ_CAP} bytes]"
        return text

    def _write(self, res: Resolved, data: bytes, unlocked: bool) -> None:
        fd = self._open(res, os.O_WRONLY | os.O_CREAT)  # no O_TRUNC: the checks come first
        with os.fdopen(fd, "wb") as fh:
            links = os.fstat(fd).st_nlink
            if links > 1 and not unlocked:  # hard-linked after the decision
                raise ToolError(f"{res.requested!r} is protected (a file with {links} hard links); a permission "
                                "rule naming the path must allow it")
            os.ftruncate(fd, 0)
            fh.write(data)

    def t_write_file(self, path: str, content: str, *, unlocked: bool = False) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        res = self._checked(path, True, unlocked)
        if res.real.is_dir():
            raise ToolError(f"{path!r} is a directory")
        res.real.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8", "surrogateescape")
        self._write(res, data, unlocked)
        return f"wrote {len(data)} bytes to {res.rel}"

    def t_edit_file(self, path: str, old: str, new: str, *, unlocked: bool = False) -> str:
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError("old and new must be strings")
        if old == "":
            raise ToolError("old must not be empty (use write_file to create a file)")
        res = self._checked(path, True, unlocked)
        if not res.real.is_file():
            raise ToolError(f"{path!r} is not a file that exists")
        with os.fdopen(self._open(res, os.O_RDONLY), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > EDIT_CAP:
                raise ToolError(f"{path!r} is {size} bytes; edit_file edits files up to {EDIT_CAP} bytes")
            text = fh.read(EDIT_CAP + 1).decode("utf-8", "surrogateescape")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"`old` does not occur in {res.rel}; read the file and copy the exact text")
        if count > 1:
            raise ToolError(f"`old` occurs {count} times in {res.rel}; include more surrounding text so it is "
                            "unique")
        self._write(res, text.replace(old, new, 1).encode("utf-8", "surrogateescape"), unlocked)
        return f"edited {res.rel}"

    def t_list_dir(self, path: str = ".", *, unlocked: bool = False) -> str:
        res = self._checked(path or ".", False, unlocked)
        if not res.real.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        tick = self._deadline("list_dir")
        names: list[str] = []
        with os.scandir(res.real) as it:
            for e in it:
                tick()
                is_dir = e.is_dir()  # a symlink to a directory is listed as one, not entered
                if not self.paths.hidden(Path(e.path), e.is_dir(follow_symlinks=False)):
                    names.append(e.name + ("/" if is_dir else ""))
        names.sort()
        more = len(names) - LIST_CAP
        return "\n".join(names[:LIST_CAP]) + (f"\n[... {more} more]" if more > 0 else "")

    def t_glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError("pattern must be a relative glob inside the workspace (no .., not absolute)")
        pat = pattern[2:] if pattern.startswith("./") else pattern
        out: list[str] = []
        for p, e in self.paths.walk(self.root, self._deadline("glob")):
            rel = self.rel(p)
            if path_glob(pat, rel):
                if e.is_symlink() and not self.paths.inside(Path(os.path.realpath(p))):
                    continue  # a symlink out of the workspace is not listed
                out.append(rel + ("/" if e.is_dir(follow_symlinks=False) else ""))
                if len(out) > LIST_CAP:
                    break
        if not out:
            return "(no match)"
        return "\n".join(out[:LIST_CAP]) + ("\n[... more]" if len(out) > LIST_CAP else "")

    def t_grep(self, pattern: str, path: str = ".", *, unlocked: bool = False) -> str:
        import regex  # evaluated with a timeout: a catastrophic pattern cannot hold the node

        try:
            rx = regex.compile(pattern)
        except (regex.error, TypeError) as exc:
            raise ToolError(f"pattern is not a valid regular expression: {exc}") from None
        res = self._checked(path or ".", False, unlocked)
        tick = self._deadline("grep")
        if res.real.is_dir():
            files: Iterator[Resolved] = self._grep_files(res.real, tick)
        else:
            files = iter([res])
        hits: list[str] = []
        end = time.monotonic() + self.timeout_s
        for f in files:
            try:
                with os.fdopen(open_checked(f, os.O_RDONLY), "rb") as fh:
                    data = fh.read(GREP_FILE_CAP)
            except (OSError, PathRefused):
                continue
            if b"\x00" in data[:8192]:
                continue  # binary
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                try:
                    found = rx.search(line, timeout=max(end - time.monotonic(), 0.001))
                except TimeoutError:
                    raise ToolError(f"grep stopped after {self.timeout_s:g}s (${WALK_TIMEOUT_ENV}) in {f.rel}:{n}: "
                                    "the pattern is too slow; simplify it or narrow the path") from None
                if found:
                    hits.append(f"{f.rel}:{n}:{line[:300]}")
                    if len(hits) >= GREP_CAP:
                        return "\n".join(hits) + f"\n[... stopped at {GREP_CAP} matches]"
        return "\n".join(hits) or "(no match)"

    def _grep_files(self, base: Path, tick: Callable[[], None]) -> Iterator[Resolved]:
        """Regular files under ``base``: no symlink followed, protected entries and the files
        ``may_read`` refuses skipped silently."""
        for p, e in self.paths.walk(base, tick):
            if not e.is_file(follow_symlinks=False):
                continue
            rel = self.rel(p)  # protected directories were not entered (Resolver.hidden)
            if self.may_read is not None and not (self.may_read("grep", rel) and self.may_read("read_file", rel)):
                continue
            yield Resolved(rel, p, rel, None)

    def t_bash(self, command: str, timeout_s: float | None = None) -> str:
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        if self.run_shell is None:
            raise ToolError("bash is not available here")
        try:
            timeout = min(float(timeout_s), BASH_MAX_TIMEOUT_S) if timeout_s else BASH_TIMEOUT_S
        except (TypeError, ValueError):
            raise ToolError("timeout_s must be a number of seconds") from None
        res = self.run_shell(command, self.root, timeout)
        out = cap(res.stdout) + (("\n[stderr]\n" + cap(res.stderr)) if res.stderr else "")
        if res.timed_out:
            raise ToolError(f"timed out after {timeout:g}s (the command's process group was killed)\n{out}")
        return f"[exit {res.exit_code}]\n{out}"


def cap(text: str, limit: int = OUTPUT_CAP) -> str:
    """``text`` cut to about ``limit`` bytes, keeping its head and tail."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    half = limit // 2
    dropped = len(data) - 2 * half
    return (data[:half].decode("utf-8", "ignore") + f"\n[... {dropped} bytes cut ...]\n"
            + data[-half:].decode("utf-8", "ignore"))


def _only(args: dict[str, Any], names: tuple[str, ...], tool: str) -> dict[str, Any]:
    unknown = sorted(set(args) - set(names))
    if unknown:
        raise ToolError(f"{tool} takes no argument {unknown[0]!r} (arguments: {', '.join(names)})")
    return args
