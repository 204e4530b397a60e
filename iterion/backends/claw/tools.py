"""The claw agent's workspace tools. Every path is confined to the workspace: it is resolved
(symlinks followed) and refused, as a tool error the model sees, when it lands outside.

A tool error is returned to the model (it can correct itself); it never fails the node. What
runs a shell command (``bash``) is injected by the engine (process group, timeout, cancel).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterion.backends.claw.wire import ToolSpec

READ_CAP = 256 * 1024          # bytes of a file read_file returns
OUTPUT_CAP = 32 * 1024         # bytes of bash output kept (head and tail)
LIST_CAP = 1000                # entries of list_dir / glob
GREP_CAP = 500                 # matching lines of grep
BASH_TIMEOUT_S = 120.0
BASH_MAX_TIMEOUT_S = 1800.0
_SKIP_DIRS = {".git", ".iterion"}


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
    def __init__(self, root: Path, run_shell: RunShell | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self.run_shell = run_shell

    # -- confinement ------------------------------------------------------------------------------
    def resolve(self, raw: Any, *, what: str = "path") -> Path:
        if not isinstance(raw, str) or raw == "":
            raise ToolError(f"{what} must be a non-empty string")
        if "\x00" in raw:
            raise ToolError(f"{what} contains a NUL byte")
        p = Path(raw)
        full = p if p.is_absolute() else self.root / p
        real = Path(os.path.realpath(full))
        if real != self.root and self.root not in real.parents:
            why = " (through a symlink)" if Path(os.path.abspath(full)).is_relative_to(self.root) else ""
            raise ToolError(f"{raw!r} is outside the workspace{why}; only paths under {self.root} are allowed")
        return real

    def rel(self, p: Path) -> str:
        return str(p.relative_to(self.root)) if p != self.root else "."

    def _writable(self, p: Path, raw: str) -> None:
        rel = p.relative_to(self.root).parts if p != self.root else ()
        if rel and rel[0] in _SKIP_DIRS:
            raise ToolError(f"{raw!r} is inside {rel[0]}/, which is not the agent's to write")

    # -- the tools --------------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any]) -> str:
        fn = getattr(self, f"t_{name}", None)
        if fn is None:
            raise ToolError(f"unknown tool {name!r}")
        params = fn.__code__.co_varnames[1:fn.__code__.co_argcount]
        required = params[:len(params) - len(fn.__defaults__ or ())]
        missing = [p for p in required if p not in args]
        if missing:
            raise ToolError(f"{name} needs argument {missing[0]!r} (arguments: {', '.join(params)})")
        result: str = fn(**_only(args, params, name))
        return result

    def t_read_file(self, path: str) -> str:
        p = self.resolve(path)
        if not p.is_file():
            raise ToolError(f"{path!r} is {'a directory' if p.is_dir() else 'not a file that exists'}")
        with open(p, "rb") as fh:
            data = fh.read(READ_CAP + 1)
        text = data[:READ_CAP].decode("utf-8", "replace")
        if len(data) > READ_CAP:
            text += f"\n[... truncated at {READ_CAP} bytes]"
        return text

    def t_write_file(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        p = self.resolve(path)
        self._writable(p, path)
        if p.is_dir():
            raise ToolError(f"{path!r} is a directory")
        p.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8", "surrogateescape")
        p.write_bytes(data)
        return f"wrote {len(data)} bytes to {self.rel(p)}"

    def t_edit_file(self, path: str, old: str, new: str) -> str:
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError("old and new must be strings")
        if old == "":
            raise ToolError("old must not be empty (use write_file to create a file)")
        p = self.resolve(path)
        self._writable(p, path)
        if not p.is_file():
            raise ToolError(f"{path!r} is not a file that exists")
        text = p.read_bytes().decode("utf-8", "surrogateescape")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"`old` does not occur in {self.rel(p)}; read the file and copy the exact text")
        if count > 1:
            raise ToolError(f"`old` occurs {count} times in {self.rel(p)}; include more surrounding text so it is "
                            "unique")
        p.write_bytes(text.replace(old, new, 1).encode("utf-8", "surrogateescape"))
        return f"edited {self.rel(p)}"

    def t_list_dir(self, path: str = ".") -> str:
        p = self.resolve(path or ".")
        if not p.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        names = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(p) if e.name not in _SKIP_DIRS)
        more = len(names) - LIST_CAP
        return "\n".join(names[:LIST_CAP]) + (f"\n[... {more} more]" if more > 0 else "")

    def t_glob(self, pattern: str) -> str:
        if not isinstance(pattern, str) or not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError("pattern must be a relative glob inside the workspace (no .., not absolute)")
        out: list[str] = []
        for m in sorted(self.root.glob(pattern)):
            rel = m.relative_to(self.root)
            if rel.parts and rel.parts[0] in _SKIP_DIRS:
                continue
            try:
                self.resolve(str(rel))
            except ToolError:
                continue  # a symlink out of the workspace is not listed
            out.append(str(rel) + ("/" if m.is_dir() else ""))
            if len(out) > LIST_CAP:
                break
        if not out:
            return "(no match)"
        return "\n".join(out[:LIST_CAP]) + ("\n[... more]" if len(out) > LIST_CAP else "")

    def t_grep(self, pattern: str, path: str = ".") -> str:
        try:
            rx = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ToolError(f"pattern is not a valid regular expression: {exc}") from None
        base = self.resolve(path or ".")
        files = [base] if base.is_file() else sorted(self._walk(base))
        hits: list[str] = []
        for f in files:
            try:
                data = f.read_bytes()[:4 * 1024 * 1024]
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue  # binary
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{self.rel(f)}:{n}:{line[:300]}")
                    if len(hits) >= GREP_CAP:
                        return "\n".join(hits) + f"\n[... stopped at {GREP_CAP} matches]"
        return "\n".join(hits) or "(no match)"

    def _walk(self, base: Path) -> list[Path]:
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
            found.extend(Path(dirpath) / f for f in filenames if not os.path.islink(os.path.join(dirpath, f)))
        return found

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
