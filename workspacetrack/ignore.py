"""Which workspace paths are never captured: git's ignore rules plus ``.iterionignore``.

Sources, lowest precedence first: ``.git/info/exclude``; ``.gitignore`` files of directories
above the workspace inside its repository; then ``.gitignore`` + ``.iterionignore`` of every
directory inside the workspace, each relative to its own directory, deeper ones winning.
Patterns are parsed by pathspec; the patterns of one directory are folded into ONE regex (last
matching pattern wins, as in git) so a file costs one regex match per rule level, and a
directory with no rule in effect costs none. An ignored directory is pruned whole, so nothing
under it can be re-included (git's rule too).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pathspec

RULE_FILES = (".gitignore", ".iterionignore")
_ANY_DEPTH = "^(?:.+/)?"


class Matcher:
    """The compiled patterns of one rule source: ``verdict`` is True (ignored), False (re-included) or None."""

    def __init__(self, lines: list[str], origins: list[str] | None = None) -> None:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        kept = [(i, p) for i, p in enumerate(spec.patterns)
                if p.include is not None and getattr(p, "regex", None) is not None]
        pats = [p for _, p in kept]
        # the source line of each alternative (reversed order, as the alternatives are)
        self._lines = [(lines[i] if i < len(lines) else "", origins[i] if origins and i < len(origins) else "")
                       for i, _ in reversed(kept)]
        regexes = [p.regex for p in pats if p.regex is not None]  # narrowed for the type checker
        self._spec = spec
        self._includes: list[bool] = []
        alternatives: list[str] = []
        srcs = [r.pattern.replace("(?P<ps_d>", "(?:") for r in regexes]
        # A pattern without an inner '/' (`*.pyc`, `build/`) matches at any depth, i.e. on the
        # last component alone; the walk tests parents before children, so when every pattern
        # is of that kind the matcher can look at the name instead of the whole path.
        self.basename_only = bool(srcs) and all(
            s.startswith(_ANY_DEPTH) and "/" not in s[len(_ANY_DEPTH):].replace("(?:/)", "").replace("[^/]", "") for s in srcs)
        if self.basename_only:
            srcs = ["^" + s[len(_ANY_DEPTH):] for s in srcs]
        # Reverse order: the regex engine takes the FIRST alternative that matches, git the LAST pattern.
        for i, (pat, src) in enumerate(zip(reversed(pats), reversed(srcs), strict=True)):
            alternatives.append(f"(?P<g{i}>{src})")
            self._includes.append(bool(pat.include))
        self._regex: re.Pattern[str] | None = None
        if alternatives:
            try:
                self._regex = re.compile("|".join(alternatives))
            except re.error:
                self._regex = None  # fall back to pathspec's own per-pattern check
        # group name -> whether that pattern ignores (False: a '!' pattern re-including)
        self.group_ignores: dict[str, bool] = {f"g{i}": inc for i, inc in enumerate(self._includes)}
        self.match = self._regex.match if self._regex is not None else None
        # name-only matchers: verdicts by name, remembered across captures (a file keeps its
        # name from one capture to the next, so an unchanged tree costs a dict lookup, not a regex)
        self.name_cache: dict[str, bool] = {}
        self.empty = not pats

    def verdict(self, path: str) -> bool | None:
        if self.empty:
            return None
        if self.basename_only:
            path = path[path.rfind("/", 0, len(path) - 1) + 1:]
        return self.verdict_name(path)

    def rule_for(self, path: str) -> str | None:
        """The pattern line that decides ``path`` (as ``verdict`` probes it), if any."""
        if self.empty or self._regex is None:
            return None
        if self.basename_only:
            path = path[path.rfind("/", 0, len(path) - 1) + 1:]
        m = self._regex.match(path)
        if m is None:
            return None
        line, origin = self._lines[int(m.lastgroup[1:])]  # type: ignore[index]
        return f"'{line}' in {origin}" if origin else f"'{line}'"

    def verdict_name(self, path: str) -> bool | None:
        """``verdict`` for a probe already reduced to what the matcher looks at."""
        if self._regex is not None:
            m = self._regex.match(path)
            if m is None:
                return None
            return self._includes[int(m.lastgroup[1:])]  # type: ignore[index]
        res = self._spec.check_file(path)
        return res.include


@dataclass(frozen=True)
class Level:
    """One rule source in effect: test ``prefix + rel[strip:]`` against ``matcher``."""

    strip: int
    prefix: str
    matcher: Matcher
    source: str = ""  # the rule file(s) the patterns come from, for reports


Levels = tuple[Level, ...]


def is_ignored(levels: Levels, rel: str, is_dir: bool) -> bool:
    if not levels:
        return False
    probe = rel + "/" if is_dir else rel
    for level in reversed(levels):
        v = level.matcher.verdict(level.prefix + probe[level.strip:])
        if v is not None:
            return v
    return False


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None


def _git_dir_of(dotgit: Path) -> Path | None:
    if dotgit.is_dir():
        return dotgit
    lines = _read_lines(dotgit)
    if lines and lines[0].startswith("gitdir:"):
        gd = Path(lines[0][len("gitdir:"):].strip())
        return gd if gd.is_absolute() else (dotgit.parent / gd)
    return None


class IgnoreRules:
    """Rule sources of one workspace, with compiled matchers cached by file stat."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._ws = str(workspace)
        self._cache: dict[str, tuple[tuple[int, ...], Matcher | None]] = {}
        self.outside_sources: list[Path] = []
        self.root_levels: Levels = ()
        # Frozen: the rule texts in force (absolute path -> text; a file absent from the map has
        # no rules), whatever is on disk now. Recording: every rule text read is noted.
        self._frozen: dict[str, str] | None = None
        self._recorded: dict[str, str] | None = None
        self.reload_outside()

    # -- the rules in force for a run: those at its start -----------------------------------
    def record(self) -> None:
        """Note every rule text read from now on (the run's first capture reads them all)."""
        if self._frozen is not None:
            return  # already fixed: ``recorded`` gives the frozen texts
        self._recorded = {}
        self._cache.clear()
        self.reload_outside()

    def recorded(self) -> dict[str, str]:
        if self._frozen is not None:
            return dict(self._frozen)
        out, self._recorded = self._recorded or {}, None
        return out

    def freeze(self, texts: dict[str, str], *, just_read: bool = False) -> None:
        """From now on, the rules are ``texts`` (what was on disk at the run's start): a rule a
        node adds, edits or removes during the run changes nothing this run captures.

        ``just_read``: ``texts`` are what ``recorded`` returned, so the compiled matchers stand
        as they are (a walk's per-directory records stay valid: no slow walk follows)."""
        self._frozen = dict(texts)
        if just_read:
            self._cache = {k: ((), m) for k, (_fp, m) in self._cache.items()}
            return
        self._cache.clear()
        self.reload_outside()

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    def _lines(self, path: Path | str) -> list[str] | None:
        key = str(path)
        if self._frozen is not None:
            text = self._frozen.get(key)
            return None if text is None else text.splitlines()
        lines = _read_lines(Path(key))
        if lines is not None and self._recorded is not None:
            self._recorded[key] = "\n".join(lines)
        return lines

    def explain(self, rel: str, is_dir: bool = False) -> str | None:
        """Which rule excludes ``rel``: "'<pattern>' in <file>" (None: not excluded by a rule)."""
        levels: Levels = self.root_levels
        root = self.level_for_dir("")
        if root is not None:
            levels = (*levels, root)
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            d = i < len(parts) or is_dir
            probe = sub + "/" if d else sub
            for level in reversed(levels):
                v = level.matcher.verdict(level.prefix + probe[level.strip:])
                if v is not None:
                    if v:
                        rule = level.matcher.rule_for(level.prefix + probe[level.strip:])
                        return rule or f"a rule in {level.source}"
                    break
            if i < len(parts):
                lv = self.level_for_dir(sub)
                if lv is not None:
                    levels = (*levels, lv)
        return None

    def reload_outside(self) -> None:
        """Re-read the rule sources outside the workspace tree (info/exclude, parent .gitignore)."""
        self.outside_sources = []
        self.root_levels = self._outside_levels()

    def _outside_levels(self) -> Levels:
        """info/exclude and the .gitignore files between the repository root and the workspace."""
        levels: list[Level] = []
        cur = self.workspace
        chain: list[Path] = []
        repo_root: Path | None = None
        while True:
            if (cur / ".git").exists():
                repo_root = cur
                break
            chain.append(cur)
            if cur.parent == cur:
                break
            cur = cur.parent
        if repo_root is None:
            return ()
        git_dir = _git_dir_of(repo_root / ".git")
        if git_dir is not None:
            common = git_dir
            commondir = _read_lines(git_dir / "commondir")
            if commondir:
                c = Path(commondir[0].strip())
                common = c if c.is_absolute() else git_dir / c
            exclude = common / "info" / "exclude"
            self.outside_sources.append(exclude)
            ex_lines = self._lines(exclude)
            if ex_lines:
                prefix = os.path.relpath(self.workspace, repo_root)
                prefix = "" if prefix == "." else prefix + "/"
                levels.append(Level(0, prefix, Matcher(ex_lines, [str(exclude)] * len(ex_lines)), str(exclude)))
        # Directories from the repository root down to (excluding) the workspace itself.
        for d in [repo_root, *reversed(chain[1:])] if chain else []:
            for name in RULE_FILES:
                self.outside_sources.append(d / name)
            lines: list[str] = []
            origins: list[str] = []
            for name in RULE_FILES:
                got = self._lines(d / name) or []
                lines += got
                origins += [str(d / name)] * len(got)
            if lines:
                prefix = os.path.relpath(self.workspace, d) + "/"
                levels.append(Level(0, prefix, Matcher(lines, origins), f"{d}/{RULE_FILES[0]}"))
        return tuple(levels)

    def outside_fingerprint(self) -> tuple[tuple[int, int, int] | None, ...]:
        """Stat of the rule files no in-workspace watch sees (a change means: walk everything)."""
        out: list[tuple[int, int, int] | None] = []
        if self._frozen is not None:
            return ()  # frozen rules do not follow the disk
        for p in self.outside_sources:
            try:
                st = os.lstat(p)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def level_for_dir(self, rel_dir: str, names: set[str] | None = None) -> Level | None:
        """The rule level a workspace directory adds, or None when it holds no rule file."""
        if names is not None and not (".gitignore" in names or ".iterionignore" in names):
            return None
        base = f"{self._ws}/{rel_dir}" if rel_dir else self._ws
        lines: list[str] = []
        sig: list[int] = []
        if self._frozen is None:
            for name in RULE_FILES:
                try:
                    st = os.stat(f"{base}/{name}")
                except OSError:
                    sig += [0, 0, 0]
                    continue
                sig += [st.st_mtime_ns, st.st_size, st.st_ino]
        key = f"{base}\x00"
        cached = self._cache.get(key)
        fp = tuple(sig)
        if cached is not None and cached[0] == fp:
            matcher = cached[1]
        else:
            origins: list[str] = []
            where = f"{rel_dir}/" if rel_dir else ""
            for name in RULE_FILES:
                got = self._lines(f"{base}/{name}") or []
                lines += got
                origins += [where + name] * len(got)
            matcher = Matcher(lines, origins) if lines else None
            self._cache[key] = (fp, matcher)
        if matcher is None or matcher.empty:
            return None
        strip = len(rel_dir) + 1 if rel_dir else 0
        return Level(strip, "", matcher, f"{rel_dir or '.'}/")

    def levels_for(self, rel: str) -> Levels | None:
        """Levels in effect for ``rel``'s directory, or None if an ancestor directory is ignored/.git."""
        levels = self.root_levels
        root = self.level_for_dir("")
        if root is not None:
            levels = (*levels, root)
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if parts[i - 1] == ".git" or is_ignored(levels, d, True):
                return None
            lv = self.level_for_dir(d)
            if lv is not None:
                levels = (*levels, lv)
        return levels

    def ignores(self, rel: str, is_dir: bool = False) -> bool:
        """Whether ``rel`` is outside what a capture records (ignored itself or under an ignored dir)."""
        if rel == ".git" or (is_dir and rel.endswith("/.git")):
            return True  # a repository's own (a .git FILE in a subfolder is content)
        levels = self.levels_for(rel)
        return levels is None or is_ignored(levels, rel, is_dir)
