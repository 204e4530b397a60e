"""What a ``bash`` command really runs, read with a shell parser (tree-sitter-bash), for the
permission rules (iterion/permissions.py; docs/technical/bash-rules.md).

``analyze(command, cwd)`` walks the whole syntax tree and returns:

* every simple command (``Invocation``), wherever it sits: pipelines, lists, ``( )``, ``{ }``,
  ``if``/``for``/``while``/``case`` bodies, function bodies, ``$( )``, backticks, ``<( )``,
  ``>( )``, here-doc bodies; words are read the way bash reads them (``'rm'``, ``r""m``, ``\\rm``
  and ``$'rm'`` are ``rm``); a program path is also seen by its base name (``/bin/rm`` is ``rm``);
* the command a wrapper runs (``command``, ``builtin``, ``exec``, ``env``, ``nice``, ``nohup``,
  ``time``, ``timeout``, ``stdbuf``, ``setsid``, ``coproc``, ``xargs``, ``sudo``, ``doas``,
  ``chroot``, ``find -exec/-execdir/-ok/-okdir``; ``find -delete`` counts as ``rm``), and the
  script of ``sh -c 'literal'`` (parsed again);
* the files a redirection (``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``>&FILE``) or a file-writing
  option (``find -fprint``, ``time -o``) writes, resolved against the workspace as far as the
  text allows (``cd DIR`` is followed);
* what cannot be understood (``Opaque``): a parse error, ``eval``, ``source``/``.``, ``alias``,
  ``trap``, a shell reading its script from its input (here-doc, here-string, pipe) or given a
  computed one, a computed program name (``$X``, ``$(...)``, a glob), a computed redirection
  target, an assignment of a variable that makes bash or a program run other code (``PATH``,
  ``BASH_ENV``, ``PS4``, ``GIT_SSH_COMMAND``...), quoted code that bash may evaluate again
  (arithmetic, array subscripts).

Pure: the result depends on the text and the ``cwd``/``home`` given (symlinks of redirection
targets are resolved by the caller, which knows the workspace).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_JOINED_LINES = re.compile(r"[^\s\\]\\\n[^\s]")
_LONE_CONTINUATION = re.compile(r"(?:^|[\n\r])[ \t]*\\\r?\n")
# builtins that only change the shell's own state: no allow rule needs to cover them
_STATE_ONLY = frozenset({"cd", "pushd", "popd", ":", "true", "false"})
MAX_DEPTH = 8  # sh -c 'sh -c ...' nesting read before the rest is called opaque


@dataclass(frozen=True)
class Invocation:
    """One program run: ``words`` as bash passes them (a computed word keeps its source text)."""
    words: tuple[str, ...]
    needs_allow: bool = True   # False: a transparent wrapper (its inner command is judged instead)
    via: str | None = None     # the wrapper it was found inside (``sudo``, ``find -exec``...)

    @property
    def program(self) -> str:
        return self.words[0]

    @property
    def text(self) -> str:
        """The command as written, one space between words (what a rule's pattern matches)."""
        return " ".join(self.words)

    @property
    def base_text(self) -> str:
        """The same with the program by its base name (``/bin/rm -rf x`` -> ``rm -rf x``)."""
        return " ".join((posixpath.basename(self.program) or self.program, *self.words[1:]))


@dataclass(frozen=True)
class Write:
    """A file a redirection writes: ``path`` absolute and normalised, or None when it cannot be
    placed (a relative path after a ``cd`` that cannot be followed)."""
    target: str
    path: str | None


@dataclass(frozen=True)
class Opaque:
    """A part of the command that cannot be fully understood, and why."""
    snippet: str
    reason: str


@dataclass
class Analysis:
    invocations: list[Invocation] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    opaque: list[Opaque] = field(default_factory=list)


# -- the parser (imported lazily: CLI start-up does not pay for it) -------------------------------
@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def analyze(command: str, cwd: str | None = None, home: str | None = None) -> Analysis:
    """``command`` read as bash would; ``cwd`` (absolute) places relative redirection targets
    (None: they are not placed), ``home`` expands ``~``."""
    out = Analysis()
    _Walker(out, home).script(command, cwd, 0)
    return out


# -- words ----------------------------------------------------------------------------------------
_DYNAMIC = frozenset({"simple_expansion", "expansion", "command_substitution", "process_substitution",
                      "arithmetic_expansion"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_ANSI = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL)
_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
                "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8) & 0xFF)
        if e[0] == "c":
            return chr(ord(e[1]) & 0x1F)
        return _ANSI_SIMPLE.get(e, "\\" + e)
    return _ANSI.sub(one, body)


def _unescape_unquoted(text: str) -> str:
    r"""A bare word: ``\x`` is ``x``, a backslash-newline disappears."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _bare_whitespace(text: str) -> bool:
    """Whether an unquoted word holds a blank or newline no backslash escapes (bash would have
    split the word there)."""
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] in " \t\n":
            return True
        i += 1
    return False


def _unescape_double(text: str) -> str:
    r"""Inside ``"..."`` only ``\$ \` \" \\`` and backslash-newline are escapes."""
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_GLOB_OR_BRACE = re.compile(r"(?<!\\)[*?\[]|(?<!\\)\{[^}]*(,|\.\.)[^}]*\}")


@dataclass(frozen=True)
class Word:
    value: str | None  # what bash passes, or None when it is computed at run time
    raw: str           # the source text
    globbing: bool = False  # an unquoted glob or brace expansion: bash may turn it into other words

    @property
    def shown(self) -> str:
        return self.value if self.value is not None else self.raw


def read_word(node: Node) -> Word:
    raw = _text(node)
    value = _literal(node)
    globbing = False
    if node.type == "word" or node.type == "concatenation":
        bare = "".join(_text(c) for c in _bare_parts(node))
        globbing = bool(_GLOB_OR_BRACE.search(bare))
    return Word(value, raw, globbing)


def _bare_parts(node: Node) -> Iterator[Node]:
    if node.type == "word":
        yield node
    elif node.type == "concatenation":
        for c in node.children:
            yield from _bare_parts(c)


def _literal(node: Node) -> str | None:
    t = node.type
    if t == "word" or t == "number" or t == "variable_name":
        return _unescape_unquoted(_text(node))
    if t == "raw_string":
        return _text(node)[1:-1]
    if t == "ansi_c_string":
        return _ansi_c(_text(node)[2:-1])
    if t in ("string", "translated_string"):
        # rebuilt from byte ranges, gaps included: the grammar leaves some text in anonymous
        # tokens ("$'x'" holds a bare "$"), and no character may be lost
        data, base = node.text or b"", node.start_byte
        kids = [c for c in node.children if c.end_byte - base <= len(data) - 1 and c.start_byte > base]
        parts: list[str] = []
        pos = data.index(b'"') + 1
        for c in kids:
            if c.is_named and c.type != "string_content":  # an expansion inside the quotes
                return None
            chunk = data[pos:c.end_byte - base].decode("utf-8", "surrogateescape")
            parts.append(_unescape_double(chunk))
            pos = c.end_byte - base
        parts.append(_unescape_double(data[pos:len(data) - 1].decode("utf-8", "surrogateescape")))
        return "".join(parts)
    if not node.is_named:  # a bare token the grammar kept apart ("$" before a quote)
        return _unescape_unquoted(_text(node))
    if t == "concatenation":
        pieces = [_literal(c) for c in node.children]
        if any(p is None for p in pieces):
            return None
        return "".join(p for p in pieces if p is not None)
    return None


# -- programs with a meaning here -----------------------------------------------------------------
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "fish",
                    "busybox"})
# run code the text does not show: opaque whatever their arguments
_OPAQUE_PROGRAMS = {"eval": "eval runs a computed command", "source": "source runs a script file's commands in this shell",
                    ".": ". runs a script file's commands in this shell", "alias": "alias changes what a name runs",
                    "trap": "trap runs a command later", "enable": "enable can load a builtin from a file",
                    "fc": "fc re-runs history", "bind": "bind can run commands",
                    "coproc": "coproc is not read by the grammar (coproc NAME { ...; })"}
# assignments that make bash or a program run other code
_CODE_VARS = frozenset({"PATH", "BASH_ENV", "ENV", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS",
                        "BASHOPTS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_LOADABLES_PATH", "PAGER",
                        "EDITOR", "VISUAL", "SSH_ASKPASS", "PYTHONSTARTUP", "PYTHONPATH", "NODE_OPTIONS",
                        "PERL5OPT", "PERL5LIB", "RUBYOPT", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PAGER",
                        "GIT_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_PROXY_COMMAND",
                        "GIT_TEMPLATE_DIR", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL",
                        "GIT_CONFIG_SYSTEM"})
_CODE_VAR_PREFIXES = ("BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
# builtins that read a variable name (an array subscript in it is evaluated: a[$(cmd)])
_NAME_BUILTINS = frozenset({"printf", "read", "declare", "typeset", "local", "export", "readonly", "unset",
                            "test", "[", "mapfile", "readarray", "getopts", "wait", "let"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "&>|"})
_HARMLESS_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/")


@dataclass(frozen=True)
class _Wrapper:
    transparent: bool                           # True: only the inner command must be allowed
    arg_opts: frozenset[str] = frozenset()      # options taking a value (-n 5, --signal=KILL)
    operands: int = 0                           # words before the command (timeout DURATION)
    no_run_opts: frozenset[str] = frozenset()   # options after which nothing is run (command -v)
    opaque_opts: frozenset[str] = frozenset()   # options that split a string into a command
    write_opts: frozenset[str] = frozenset()    # options whose value is a file written (time -o)
    assignments: bool = False                   # NAME=VALUE words before the command (env, sudo)


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, _Wrapper] = {
    "command": _Wrapper(True, no_run_opts=_f("-v", "-V")),
    "builtin": _Wrapper(True),
    "exec": _Wrapper(True, arg_opts=_f("-a")),
    "nice": _Wrapper(True, arg_opts=_f("-n", "--adjustment")),
    "nohup": _Wrapper(True),
    "time": _Wrapper(True, arg_opts=_f("-f", "--format", "-o", "--output"), write_opts=_f("-o", "--output")),
    "timeout": _Wrapper(True, arg_opts=_f("-s", "--signal", "-k", "--kill-after"), operands=1),
    "env": _Wrapper(True, arg_opts=_f("-u", "--unset", "-C", "--chdir", "-S", "--split-string"),
                    opaque_opts=_f("-S", "--split-string"), assignments=True),
    "stdbuf": _Wrapper(True, arg_opts=_f("-i", "-o", "-e", "--input", "--output", "--error")),
    "setsid": _Wrapper(True),
    "xargs": _Wrapper(True, arg_opts=_f("-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n",
                                        "--max-args", "-P", "--max-procs", "-s", "--max-chars",
                                        "--process-slot-var", "--eof", "--max-lines")),
    "sudo": _Wrapper(False, arg_opts=_f("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user",
                                        "--group", "--chdir", "--prompt", "--role", "--type", "--other-user",
                                        "--command-timeout", "--close-from", "--host"),
                     no_run_opts=_f("-e", "--edit", "-l", "--list", "-v", "--validate", "-K", "-V"),
                     assignments=True),
    "doas": _Wrapper(False, arg_opts=_f("-u", "-C")),
    "chroot": _Wrapper(False, arg_opts=_f("--userspec", "--groups"), operands=1),
    "busybox": _Wrapper(True),
}


def _is_assignment(word: str) -> bool:
    return re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) is not None


def _code_var(name: str) -> bool:
    return name in _CODE_VARS or name.startswith(_CODE_VAR_PREFIXES)


class _Walker:
    def __init__(self, out: Analysis, home: str | None) -> None:
        self.out = out
        self.home = home
        self.cwd: str | None = None
        self.depth = 0
        self.inert_code = False     # quoted text that looks like code: '$(x)', '`x`'
        self.arithmetic = False     # a place where bash evaluates text again: (( )), $(( )), [[ ]]

    # -- entry --------------------------------------------------------------------------------
    def script(self, text: str, cwd: str | None, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.opaque(text, "shell scripts nested too deeply to follow")
            return
        if "\x00" in text:
            self.opaque(text, "a NUL byte in the command")
            return
        joined = _JOINED_LINES.search(text)
        if joined:  # bash removes backslash-newline first (r\<newline>m is rm); the grammar splits there
            self.opaque(text[max(0, joined.start() - 20):joined.end() + 20], "a word continued on the next line")
            return
        lone = _LONE_CONTINUATION.search(text)
        if lone:  # a continuation on a line of its own: the grammar glues it to the line above
            self.opaque(text[max(0, lone.start() - 20):lone.end() + 20], "a line continuation on a line of its own")
            return
        self.cwd = cwd
        tree = _parser().parse(text.encode("utf-8", "surrogateescape"))
        root = tree.root_node
        if root.has_error:
            bad = next(self._errors(root), root)
            self.opaque(_text(bad)[:80] or text[:80], "the shell parser could not read it")
            return
        self.depth = depth
        self.node(root)
        if self.inert_code and self.arithmetic:
            self.opaque(text[:80], "quoted code that bash may evaluate again (arithmetic or an array subscript)")

    def _errors(self, node: Node) -> Iterator[Node]:
        if node.type == "ERROR" or node.is_missing:
            yield node
        for c in node.children:
            if c.has_error or c.is_missing or c.type == "ERROR":
                yield from self._errors(c)

    def opaque(self, snippet: str, reason: str) -> None:
        self.out.opaque.append(Opaque(snippet, reason))

    # -- the tree -----------------------------------------------------------------------------
    def node(self, n: Node) -> None:
        t = n.type
        if t == "command":
            self.command(n)
            return
        if t == "file_redirect":
            self.redirect(n)
        elif t == "variable_assignment":
            self.assignment(n)
        elif t == "declaration_command" or t == "unset_command":
            self.declaration(n)
        elif t in ("arithmetic_expansion", "test_command", "c_style_for_statement"):
            self.arithmetic = True
        elif t == "compound_statement" and n.children and n.children[0].type == "((":
            self.arithmetic = True
        elif t == "expansion" and any(c.type == "@" for c in n.children):
            self.arithmetic = True  # ${x@P} expands prompt escapes, $(...) included
        elif t in ("raw_string", "ansi_c_string", "string", "word"):
            if t == "word" and _bare_whitespace(_text(n)):
                # the grammar glued text across a blank or a line ("git log\n\\rm x" read as
                # one command): bash splits there, so nothing read here can be trusted
                self.opaque(_text(n)[:80], "the parser split words differently from bash")
            value = _literal(n)
            if value is not None and ("$(" in value or "`" in value):
                self.inert_code = True
        elif t == "heredoc_redirect":
            self.heredoc(n)
        elif t == "command_substitution" and _text(n).startswith("`") and "\\" in _text(n):
            # inside backticks bash unescapes \\, \` and \$ before reading the text again, so
            # `echo \`rm x\`` runs rm: read the unescaped text as a script of its own
            inner = re.sub(r"\\([\\`$])", r"\1", _text(n)[1:-1])
            child = _Walker(self.out, self.home)
            child.script(inner, self.cwd, self.depth + 1)
            return
        for c in n.children:
            self.node(c)

    def heredoc(self, n: Node) -> None:
        body = next((c for c in n.children if c.type == "heredoc_body"), None)
        start = next((c for c in n.children if c.type == "heredoc_start"), None)
        if body is None or start is None:
            return
        text, quoted = _text(body), any(q in _text(start) for q in "'\"\\")
        delim = re.sub(r"['\"\\]", "", _text(start))
        strip_tabs = any(c.type == "<<-" for c in n.children)
        if any((line.lstrip("\t") if strip_tabs else line) == delim for line in text.split("\n")):
            # the grammar ran past a line bash ends the here-document at: what follows is unread
            self.opaque(text[:80], "a here-document the parser may have misread")
        elif "$(" in text or "`" in text:
            if quoted:
                self.inert_code = True
            else:  # the grammar misses substitutions in some bodies (<<- with tabs): not guessed
                self.opaque(text[:80], "a here-document that runs commands")

    def assignment(self, n: Node) -> None:
        name = n.child_by_field_name("name")
        if name is not None and _code_var(_text(name).split("[")[0]):
            self.opaque(_text(n)[:80], f"assigning {_text(name)} changes what programs run")
        if name is not None and _text(name) == "CDPATH":
            self.cwd = None

    def declaration(self, n: Node) -> None:
        for c in n.children:
            if c.type in ("word", "raw_string", "string", "concatenation"):
                w = read_word(c)
                if w.value is None:
                    continue
                if _is_assignment(w.value) and _code_var(w.value.split("=", 1)[0]):
                    self.opaque(_text(n)[:80], f"assigning {w.value.split('=', 1)[0]} changes what programs run")
                if "[" in w.value and ("$(" in w.value or "`" in w.value):
                    self.opaque(_text(n)[:80], "an array subscript that runs a command")

    def redirect(self, n: Node) -> None:
        op = next((c for c in n.children if not c.is_named), None)
        dest = n.child_by_field_name("destination")
        if dest is None:
            named = [c for c in n.children if c.is_named and c.type != "file_descriptor"]
            dest = named[-1] if named else None
        if op is None or dest is None or _text(op) not in _WRITE_OPS:
            return
        if _text(op) == ">&" and (dest.type == "number" or _text(dest) == "-"):
            return  # 2>&1: a file descriptor, not a file
        self.write(read_word(dest), _text(n))

    def write(self, w: Word, shown: str) -> None:
        if w.value is None or w.globbing:
            self.opaque(shown[:80], "a redirection to a computed path")
            return
        target = w.value
        if w.raw.startswith("~"):
            if self.home is None:
                self.out.writes.append(Write(target, None))
                return
            user, _, rest = w.value[1:].partition("/")
            if user:
                self.out.writes.append(Write(target, None))
                return
            target = posixpath.join(self.home, rest)
        if target.startswith(_HARMLESS_TARGETS):
            return
        if posixpath.isabs(target):
            self.out.writes.append(Write(w.value, posixpath.normpath(target)))
        elif self.cwd is None:
            self.out.writes.append(Write(w.value, None))
        else:
            self.out.writes.append(Write(w.value, posixpath.normpath(posixpath.join(self.cwd, target))))

    # -- simple commands ----------------------------------------------------------------------
    def command(self, n: Node) -> None:
        words: list[Word] = []
        name_node = n.child_by_field_name("name")
        for c in n.children:
            if c.type == "variable_assignment":
                self.node(c)
            elif c.type in _REDIRECTS:
                self.node(c)
            elif c.type == "command_name":
                inner = c.children[0] if c.children else c
                words.append(read_word(inner))
                self.node(inner)
            elif c.is_named and name_node is not None:
                words.append(read_word(c))
                self.node(c)  # substitutions inside the argument, quoted text that looks like code
        if words:
            self.run(words, _text(n), via=None, needs_allow=True)

    def run(self, words: list[Word], shown: str, via: str | None, needs_allow: bool) -> None:
        prog = words[0]
        if prog.value is None or prog.globbing or prog.value == "":
            self.opaque(shown[:80], f"the program name {prog.raw!r} is computed at run time")
            return
        base = posixpath.basename(prog.value) or prog.value
        self.out.invocations.append(Invocation(tuple(w.shown for w in words), needs_allow and base not in _STATE_ONLY,
                                               via))
        if base in _OPAQUE_PROGRAMS:
            self.opaque(shown[:80], _OPAQUE_PROGRAMS[base])
        elif base in _NAME_BUILTINS and any(w.value is not None and "[" in w.value and ("$(" in w.value or "`" in w.value)
                                            for w in words[1:]):
            self.opaque(shown[:80], "an array subscript that runs a command")
        elif base == "hash" and any(w.value == "-p" for w in words[1:]):
            self.opaque(shown[:80], "hash -p changes what a name runs")
        if base == "busybox" and len(words) > 1 and words[1].value not in SHELLS:
            self.wrapper(words, shown, base)  # a multi-call binary: busybox rm x is rm x
        elif base in SHELLS:
            self.shell(words, shown, base)
        elif base in WRAPPERS and base != "busybox":
            self.wrapper(words, shown, base)
        elif base == "find":
            self.find(words, shown)
        elif base in ("cd", "pushd", "popd"):
            self.cd(words, base)

    def shell(self, words: list[Word], shown: str, base: str) -> None:
        rest = words[1:]
        if base == "busybox":
            if not rest or rest[0].value not in SHELLS:
                return
            rest = rest[1:]
        i, has_c, stdin = 0, False, False
        while i < len(rest):
            a = rest[i].value
            if a is None:
                self.opaque(shown[:80], "a shell given computed options")
                return
            if a in ("--", "-"):
                i += 1
                break
            if a.startswith("--"):
                i += 2 if a in ("--rcfile", "--init-file") else 1
                continue
            if len(a) > 1 and a[0] in "-+":
                letters = a[1:]
                has_c = has_c or "c" in letters
                stdin = stdin or "s" in letters
                i += 2 if ("o" in letters or "O" in letters) else 1
                continue
            break
        if has_c:
            if i >= len(rest) or rest[i].value is None:
                self.opaque(shown[:80], "a shell given a computed script")
                return
            child = _Walker(self.out, self.home)
            child.script(rest[i].value or "", self.cwd, self.depth + 1)
            return
        if stdin or i >= len(rest):
            self.opaque(shown[:80], "a shell reading its commands from its input")

    def wrapper(self, words: list[Word], shown: str, base: str) -> None:
        spec = WRAPPERS[base]
        # the wrapper itself stays an invocation; a transparent one needs no allow of its own
        if spec.transparent:
            last = self.out.invocations[-1]
            self.out.invocations[-1] = Invocation(last.words, False, last.via)
        i, operands = 1, spec.operands
        replace: str | None = None
        while i < len(words):
            a = words[i].value
            if a is None:
                self.opaque(shown[:80], f"{base} given a computed option")
                return
            if a == "--":
                i += 1
                break
            if spec.assignments and _is_assignment(a):
                if _code_var(a.split("=", 1)[0]):
                    self.opaque(shown[:80], f"assigning {a.split('=', 1)[0]} changes what programs run")
                i += 1
                continue
            if base == "nice" and a[:1] == "-" and a[1:].lstrip("-").isdigit():
                i += 1  # nice -10: the old adjustment syntax
                continue
            if a.startswith("-") and len(a) > 1:
                opt, eq, val = a.partition("=")
                if not a.startswith("--") and len(a) > 2 and a[:2] in spec.arg_opts:
                    opt, eq, val = a[:2], "=", a[2:]  # -n5, -Ifoo
                if opt in spec.no_run_opts:
                    return
                if opt in spec.opaque_opts:
                    self.opaque(shown[:80], f"{base} {opt} splits a string into a command")
                    return
                if base == "xargs" and (opt in ("-I", "-i") or opt.startswith("--replace")):
                    if opt == "-I":
                        replace = val if eq else (words[i + 1].value if i + 1 < len(words) else None)
                    else:
                        replace = val or "{}"
                if opt in spec.arg_opts and not eq:
                    if opt in spec.write_opts and i + 1 < len(words):
                        self.write(words[i + 1], shown)
                    i += 2
                else:
                    if opt in spec.write_opts and eq:
                        self.write(Word(val, val), shown)
                    i += 1
                continue
            if operands:
                operands -= 1
                i += 1
                continue
            break
        inner = words[i:]
        if not inner:
            if base == "xargs":
                self.out.invocations.append(Invocation(("echo", "{}"), True, "xargs"))
            return
        if replace:
            inner = [Word(None, w.raw) if (w.value is not None and replace in w.value) else w for w in inner]
        elif base == "xargs":
            inner = [*inner, Word(None, "{}")]  # the words xargs appends from its input
        self.run(inner, shown, via=base, needs_allow=True)

    def find(self, words: list[Word], shown: str) -> None:
        starts: list[str] = []
        i = 1
        while i < len(words) and (words[i].value is None or not (words[i].value or "").startswith(("-", "(", "!"))):
            starts.append(words[i].shown)
            i += 1
        while i < len(words):
            a = words[i].value
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(words) and words[j].value != ";" and not (
                        words[j].value == "+" and words[j - 1].value == "{}"):
                    j += 1
                inner = [Word(None, w.raw) if w.value is not None and "{}" in w.value else w
                         for w in words[i + 1:j]]
                if inner:
                    self.run(inner, shown, via=f"find {a}", needs_allow=True)
                i = j + 1
                continue
            if a == "-delete":
                self.out.invocations.append(Invocation(("rm", "-rf", *(starts or ["."])), True, "find -delete"))
            elif a in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(words):
                self.write(words[i + 1], shown)
            i += 1

    def cd(self, words: list[Word], base: str) -> None:
        args = [w for w in words[1:] if not (w.value or "").startswith("-") or w.value == "-"]
        if base != "cd" or self.cwd is None:
            self.cwd = None
            return
        if not args:
            self.cwd = self.home
            return
        w = args[0]
        if w.value is None or w.value == "-" or w.globbing:
            self.cwd = None
        elif w.raw.startswith("~"):
            user, _, rest = w.value[1:].partition("/")
            self.cwd = posixpath.join(self.home, rest) if (self.home and not user) else None
        else:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, w.value))


def realpath_within(path: str, root: str) -> bool:
    """Whether ``path`` (absolute), with the symlinks that exist now resolved, lies in ``root``."""
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def describe(a: Analysis) -> dict[str, Any]:
    """A JSON-able summary (for tests and events)."""
    return {"invocations": [i.text for i in a.invocations], "writes": [w.path or w.target for w in a.writes],
            "opaque": [o.reason for o in a.opaque]}
