"""Where the loader reads program files from: the filesystem, or files held in memory (a
`.botz` archive, or a run's recorded sources).

Reading a `.botz` never touches the disk: members are validated (no absolute paths, no
``..``, no links or devices) and kept in memory, so a hostile archive cannot write anywhere.
Paths inside an archive are addressed as ``<archive path>/<member>`` so diagnostics read
naturally (``bot.botz/main.bot:3:1``).
"""

from __future__ import annotations

import io
import os
import posixpath
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol

from gitrefs.persist.inputs import (
    ARCHIVE_LIMIT,
    SOURCE_LIMIT,
    InputFileError,
    read_bounded,
    read_text_bounded,
)

# a bundle's layout names (iterion/dsl/bundle.py reads the bundle): here so the loader tells a
# bundle from a file without importing the bundle reader (YAML, pydantic) for a plain .bot
MANIFEST = "manifest.yaml"
MAIN = "main.bot"

# A bundle is text and a few assets; anything bigger is refused rather than read into memory.
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024


class SourceError(Exception):
    """A problem with the archive or a member path; ``code`` is the diagnostic code to report."""

    def __init__(self, message: str, code: str = "L004") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class SourceTree(Protocol):
    def read_text(self, path: Path) -> str: ...
    def exists(self, path: Path) -> bool: ...
    def listdir(self, path: Path) -> list[Path]: ...


def display(path: Path) -> str:
    return os.path.normpath(str(path))


class FileSystemTree:
    def read_text(self, path: Path) -> str:
        """A regular file of bounded size (gitrefs.persist.inputs), decoded as UTF-8."""
        return read_text_bounded(path, "workflow file", SOURCE_LIMIT)

    def exists(self, path: Path) -> bool:
        return path.exists()

    def listdir(self, path: Path) -> list[Path]:
        if not path.is_dir():
            return []
        # everything but directories: a FIFO among a bundle's prompts is refused when read,
        # not skipped in silence
        return sorted(p for p in path.iterdir() if not p.is_dir())


class OverlayTree(FileSystemTree):
    """The file system, except for the files given as text (an editor's unsaved buffers, keyed by
    absolute normalised path): the language server validates what is on screen, through the same
    loader as `iterion validate`."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = {os.path.normpath(os.path.abspath(k)): v for k, v in texts.items()}

    def read_text(self, path: Path) -> str:
        held = self.texts.get(os.path.normpath(os.path.abspath(path)))
        return held if held is not None else super().read_text(path)

    def exists(self, path: Path) -> bool:
        return os.path.normpath(os.path.abspath(path)) in self.texts or super().exists(path)


def safe_member_name(name: str) -> str:
    """The normalised relative path of an archive member, or SourceError (code L005)."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise SourceError(f"archive member {name!r} has an absolute path", "L005")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise SourceError(f"archive member {name!r} escapes the bundle with '..'", "L005")
    norm = posixpath.normpath("/".join(p for p in parts if p not in (".", "")))
    return "" if norm == "." else norm


def read_archive(path: Path) -> dict[str, bytes]:
    """Every regular file of a `.botz` (tar.gz), keyed by its relative path."""
    import tarfile  # archives only: validating a .bot file never reads one

    files: dict[str, bytes] = {}
    total = 0
    try:
        packed = read_bounded(path, ".botz archive", ARCHIVE_LIMIT)
    except InputFileError as exc:
        raise SourceError(f"cannot read {path}: {exc.reason}") from None
    except OSError as exc:
        raise SourceError(f"cannot read {path} as a .botz (tar.gz) archive: {exc}") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            for member in tar:
                rel = safe_member_name(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    kind = "link" if (member.issym() or member.islnk()) else "special file"
                    raise SourceError(f"archive member {member.name!r} is a {kind}; bundles hold regular files only",
                                      "L005")
                total += member.size
                if total > MAX_ARCHIVE_BYTES:
                    raise SourceError(f"archive is larger than {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB unpacked")
                fh = tar.extractfile(member)
                if fh is None or not rel:
                    continue
                files[rel] = fh.read()
    except SourceError:
        raise
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SourceError(f"cannot read {path} as a .botz (tar.gz) archive: {exc}") from None
    # tolerate a single top-level directory wrapping the bundle (tar czf x.botz mybot/)
    if "main.bot" not in files:
        tops = {k.split("/", 1)[0] for k in files}
        if len(tops) == 1:
            top = tops.pop()
            if f"{top}/main.bot" in files:
                files = {k[len(top) + 1:]: v for k, v in files.items() if k.startswith(top + "/")}
    return files


def extract_archive(path: Path, dest: Path) -> list[Path]:
    """Safely unpack a `.botz` into ``dest`` (for the engine's skills/attachments); returns the files."""
    files = read_archive(path)
    dest = dest.resolve()
    written: list[Path] = []
    for rel, data in sorted(files.items()):
        target = (dest / rel).resolve()
        if dest not in target.parents:
            raise SourceError(f"archive member {rel!r} would be written outside {dest}", "L005")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(target)
    return written


class MemoryTree:
    """Files held in memory, addressed as ``root / key``: a `.botz`'s members (bytes, decoded on
    read so a non-UTF-8 member is reported like a file on disk), or a run's recorded sources
    (text, keyed by paths relative to the main file's directory, ``../`` allowed)."""

    def __init__(self, root: Path, files: Mapping[str, bytes | str]) -> None:
        self.root = Path(os.path.normpath(str(root)))
        self.files = {posixpath.normpath(k): v for k, v in files.items()}

    def _rel(self, path: Path) -> str | None:
        norm = Path(os.path.normpath(str(path)))
        try:
            return norm.relative_to(self.root).as_posix()
        except ValueError:
            return None

    def read_text(self, path: Path) -> str:
        rel = self._rel(path)
        if rel is None or rel not in self.files:
            raise FileNotFoundError(f"{path} is not among the files")
        data = self.files[rel]
        return data if isinstance(data, str) else data.decode("utf-8")

    def exists(self, path: Path) -> bool:
        rel = self._rel(path)
        return rel is not None and (rel in self.files or any(k.startswith(rel + "/") for k in self.files))

    def listdir(self, path: Path) -> list[Path]:
        rel = self._rel(path)
        if rel is None:
            return []
        prefix = "" if rel == "." else rel + "/"
        return sorted(self.root / k for k in self.files if k.startswith(prefix) and "/" not in k[len(prefix):])
