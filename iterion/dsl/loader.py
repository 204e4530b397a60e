"""Loader: a path (file, bundle directory or `.botz`), or sources held in memory -> the unit's
files, parsed, compiled, validated.

Imports are resolved relative to the importing file (depth first, each file once, cycles are
L002); a bundle's prompts and presets join the declarations; includes are read through the
same source tree so a `.botz` never needs unpacking to be validated.

Containment: an ``import`` or ``{{include}}`` resolves inside the project, or is refused
before anything is opened: the bundle for a bundle (directory or ``.botz``), else the git
repository holding the main file, else the main file's directory. Absolute paths are refused;
``..`` and symlinks are judged by where they land (the resolved path must stay under the
resolved root). An import outside is L005 ("unsafe path"; no code names imports
specifically), an include outside is L003 (an include failure, absolute paths among
them): docs/language.md section 6. Every file is read through ``gitrefs.persist.inputs`` (regular
files only, bounded size): a FIFO or ``/dev/zero`` is an L001/L003 diagnostic, not a hang.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gitrefs.persist.inputs import SOURCE_LIMIT, InputFileError
from iterion.dsl import ast
from iterion.dsl.blocks import check_blocks
from iterion.dsl.compiler import Compiler
from iterion.dsl.diagnostics import Severity, Sink, sort_key
from iterion.dsl.parser import parse, too_large
from iterion.dsl.sources import (
    MAIN,
    MANIFEST,
    FileSystemTree,
    MemoryTree,
    OverlayTree,
    SourceError,
    SourceTree,
    display,
    read_archive,
)
from iterion.dsl.unit import CompileResult, Unit, UnitRole
from iterion.dsl.validate import validate
from iterion.failure_codes import FailureCode
from iterion.ir import Span
from iterion.templates import relative_target

BOTZ_SUFFIX = ".botz"


def load_workflow(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None,
                  overlay: Mapping[str, str] | None = None) -> CompileResult:
    """Load, compile and validate the workflow at ``path`` (a .bot/.iter file, a bundle directory or a .botz).

    ``overlay`` (absolute path -> text) replaces those files' contents on disk: an editor's
    unsaved buffers, validated exactly as `iterion validate` would once they are saved."""
    env = os.environ if env is None else env
    p = Path(path)
    sink = Sink()
    if p.suffix == BOTZ_SUFFIX and p.is_file():
        try:
            files = read_archive(p)
        except SourceError as exc:
            sink.add(exc.code, Span(display(p), 1, 1), exc.message, "a .botz is a tar.gz of a bundle directory")
            return CompileResult(None, sink.items, Unit(display(p)))
        tree: SourceTree = MemoryTree(p, files)
        return _load(tree, p / MAIN, p, env, sink, root=p)
    tree = FileSystemTree() if not overlay else OverlayTree(overlay)
    if p.is_dir():
        return _load(tree, p / MAIN, p, env, sink, root=p)
    bundle_root = p.parent if p.name == MAIN and (p.parent / MANIFEST).exists() else None
    return _load(tree, p, bundle_root, env, sink, root=bundle_root or project_root(p))


def load_source(text: str, *, file: str = "<memory>.bot", env: Mapping[str, str] | None = None) -> CompileResult:
    """Compile source held in memory (imports and includes resolve relative to ``file``)."""
    env = os.environ if env is None else env
    return _Loader(FileSystemTree(), env, Sink(), project_root(Path(file))).run(Path(file), None, text=text)


def load_tree(sources: Mapping[str, str], main: str, *, bundle_root: str | None = None,
              env: Mapping[str, str] | None = None, parse_only: bool = False) -> CompileResult:
    """Load, compile and validate a unit held in memory, e.g. the sources a run recorded.

    ``sources`` maps POSIX paths (relative to one directory, typically the main file's;
    ``../`` allowed) to text; ``main`` is the key of the main file; ``bundle_root`` (a key
    directory such as ``"."``) makes ``prompts/*.md``, ``presets/*.md`` and the manifest under
    it a bundle's. Imports and includes resolve among ``sources`` exactly as on disk; the
    unit's paths are the normalised keys. ``parse_only`` stops once the main file and the
    fragments it imports are parsed (``unit.asts``; no workflow, includes not read).
    """
    env = os.environ if env is None else env
    tree = MemoryTree(Path("."), sources)
    return _load(tree, Path(main), Path(bundle_root) if bundle_root is not None else None, env, Sink(),
                 parse_only=parse_only)


def project_root(main: Path) -> Path:
    """Where the imports and includes of the file ``main`` (not a bundle) must stay: the git
    repository holding it (a ``.git`` directory or file), else its own directory."""
    start = Path(os.path.abspath(main)).parent
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return start


def resolve_import(importer: str, target: str) -> str:
    """The path an ``import "target"`` written in the file ``importer`` names (relative to it)."""
    return relative_target(os.path.dirname(importer), target)


def _load(tree: SourceTree, main: Path, bundle_root: Path | None, env: Mapping[str, str], sink: Sink,
          *, parse_only: bool = False, root: Path | None = None) -> CompileResult:
    if bundle_root is not None and not tree.exists(main):
        sink.add("L004", Span(display(bundle_root), 1, 1), f"bundle {display(bundle_root)} has no {MAIN}",
                 f"a bundle holds {MAIN}, prompts/*.md, presets/*.md and {MANIFEST}")
        return CompileResult(None, sink.items, Unit(display(main), bundle_root=display(bundle_root)))
    return _Loader(tree, env, sink, root).run(main, bundle_root, parse_only=parse_only)


class OutsideProject(PermissionError):
    """An import or include that would leave the project root (its message says where)."""


class _Loader:
    def __init__(self, tree: SourceTree, env: Mapping[str, str], sink: Sink, root: Path | None = None) -> None:
        self.tree = tree
        self.env = env
        self.sink = sink
        self.root = root  # None: no containment (a run's recorded sources: only they can be read)
        self.decls: list[ast.Decl] = []
        self.loaded: set[str] = set()
        self.unit = Unit("")

    def check_inside(self, path: Path, written: str | None = None) -> None:
        """Refuse (OutsideProject) a target that is absolute as ``written`` or lands outside the root."""
        if "\0" in str(path):
            raise OutsideProject(f"path {written or str(path)!r} contains a NUL byte")
        if written is not None and os.path.isabs(written):
            raise OutsideProject(f"{written} is an absolute path; write it relative to the file that names it")
        if self.root is None:
            return
        root = os.path.abspath(self.root)
        target = os.path.abspath(path)
        inside = os.path.commonpath([root, target]) == root
        if inside and isinstance(self.tree, FileSystemTree):
            real_root = os.path.realpath(root)  # a symlink is judged by where it lands
            inside = os.path.commonpath([real_root, os.path.realpath(target)]) == real_root
        if not inside:
            what = f"{written} resolves to {display(path)}, which is" if written else f"{display(path)} is"
            raise OutsideProject(f"{what} outside the project {display(self.root)}")

    def read_include(self, path: Path) -> str:
        self.check_inside(path)
        try:
            text = self.tree.read_text(path)
        except InputFileError as exc:
            raise OSError(exc.reason) from None  # the includer words it (L003)
        self.unit.add(display(path), text, UnitRole.INCLUDE)
        return text

    def run(self, main: Path, bundle_root: Path | None, text: str | None = None, *,
            parse_only: bool = False) -> CompileResult:
        self.unit = Unit(display(main), bundle_root=display(bundle_root) if bundle_root else None)
        contents = None
        if bundle_root is not None:
            from iterion.dsl.bundle import load_bundle  # YAML and the manifest model: bundles only

            contents, diags = load_bundle(self.tree, bundle_root)
            self.sink.extend(diags)
            if any(d.code == FailureCode.BOT_REQUIRES_NEWER_ENGINE.value for d in diags):
                # refused: a newer bundle may use syntax this version would misreport
                self.unit.files.extend(contents.texts)
                return self.result(None)
        self.load_file(main, None, (), text)
        if parse_only or any(d.severity is Severity.ERROR and (d.code.startswith("P") or d.code in ("L001", "L002"))
                             for d in self.sink.items):
            # a dropped line would surface as misleading compile errors (a missing model, an
            # unknown node): report what does not parse, and compile once it does (parse_only:
            # the caller reads the trees, not the workflow)
            return self.result(None)
        if contents is not None:
            for f in contents.texts:
                self.unit.add(f.path, f.text, f.role)
            # bundle prompts first: a .bot prompt of the same name is then the one reported (C041)
            self.decls = [*contents.prompts, *contents.presets, *self.decls]
        compiled = Compiler(self.decls, self.sink, env=self.env, read=self.read_include,
                            main_file=display(main)).run()
        check_blocks(self.decls, self.sink)
        wf = compiled.workflow
        if wf is not None:
            validate(wf, compiled.sources, self.sink)
            if self.root is not None and isinstance(self.tree, FileSystemTree):
                # on disk only: a run's recorded sources (or a .botz) hold no child to check
                from iterion.dsl.subbots import check_subbots

                check_subbots(wf, main, self.env, self.sink, self.check_inside, load_workflow)
        return self.result(wf)

    def result(self, wf: object) -> CompileResult:
        diags = sorted(self.sink.items, key=sort_key)
        ok = wf is not None and not self.sink.has_errors
        return CompileResult(wf if ok else None, diags, self.unit)  # type: ignore[arg-type]

    def load_file(self, path: Path, importer: Span | None, stack: tuple[str, ...], text: str | None = None,
                  written: str | None = None) -> None:
        key = display(path)
        where = importer or Span(key, 1, 1)
        if key in stack:
            cycle = " -> ".join((*stack[stack.index(key):], key))
            self.sink.add("L002", where, f"import cycle: {cycle}", "a file cannot import itself, even indirectly")
            return
        if key in self.loaded:
            return  # imported twice through different paths: its declarations count once
        if text is None:
            try:
                if written is not None:  # an import (the main file is what the user named)
                    self.check_inside(path, written)
                text = self.tree.read_text(path)
            except OutsideProject as exc:
                self.sink.add("L005", where, f"import refused: {exc}",
                              "imports resolve inside the project (the bundle, else the git repository, "
                              "else the main file's directory)")
                return
            except InputFileError as exc:
                if exc.over is SOURCE_LIMIT and SOURCE_LIMIT.env not in os.environ:
                    # Over the reader's default cap means over the language's 10 MiB: the
                    # language's code and fix, not a hint to raise a memory guard.
                    self.sink.extend([too_large(key, where)])
                else:
                    self.sink.add("L001", where, f"cannot read {key}: {exc.reason}", exc.hint)
                return
            except UnicodeDecodeError:
                self.sink.add("P010", where, f"{key} is not UTF-8 text")
                return
            except (OSError, ValueError) as exc:
                what = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
                self.sink.add("L001", where, f"cannot read {key}: {what}",
                              "import paths are relative to the importing file" if importer else None)
                return
        self.loaded.add(key)
        file_ast, diags = parse(text, key)
        self.sink.extend(diags)
        self.unit.add(key, text, UnitRole.FRAGMENT if stack else UnitRole.MAIN)
        self.unit.asts.append(file_ast)
        if any(d.severity is Severity.ERROR for d in diags):
            self.unit.unparsed.append(key)
        for decl in file_ast.decls:
            if isinstance(decl, ast.ImportDecl):
                self.load_file(Path(resolve_import(key, decl.path)), decl.span, (*stack, key), written=decl.path)
            else:
                self.decls.append(decl)
