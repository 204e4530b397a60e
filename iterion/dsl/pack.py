"""`iterion bundle pack`: a bundle directory -> a deterministic `.botz` (tar.gz).

Same inputs, same bytes: members in sorted path order, every timestamp 0, owner 0:0 with no
names, mode 0644 (0755 for an executable file), a plain USTAR header, and a gzip header with
no file name and mtime 0. So a packed bundle can be checked in, hashed and compared.

What goes in: every regular file under the directory, except hidden entries (a name starting
with ``.``: ``.git``, ``.DS_Store``) and ``__pycache__``. A symlink, FIFO or device is refused
(the loader refuses them in a `.botz` too), as is a directory without ``main.bot``.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from gitrefs.persist import UserError
from gitrefs.persist.inputs import ARCHIVE_LIMIT, SOURCE_LIMIT, read_bounded
from iterion.dsl.bundle import MAIN

SKIPPED_DIRS = frozenset({"__pycache__"})


class PackError(UserError):
    """The directory cannot be packed (not a bundle, a link or special file inside): exit 2."""


@dataclass(frozen=True)
class Packed:
    data: bytes
    members: list[str]


def bundle_members(root: Path) -> list[str]:
    """Relative POSIX paths of the files a pack of ``root`` holds, sorted."""
    if not root.is_dir():
        raise PackError(f"{root} is not a directory", hint="bundle pack takes a bundle directory (main.bot inside)")
    if not (root / MAIN).is_file():
        raise PackError(f"{root} has no {MAIN}", hint=f"a bundle holds {MAIN}, prompts/*.md, presets/*.md "
                                                      "and manifest.yaml")
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for d in list(dirnames):
            if d.startswith(".") or d in SKIPPED_DIRS:
                dirnames.remove(d)
            elif (here / d).is_symlink():
                raise PackError(f"{here / d} is a symbolic link; a bundle holds regular files only",
                                hint="copy the target into the bundle")
        for name in filenames:
            if name.startswith("."):
                continue
            path = here / name
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise PackError(f"{path} is {kind}; a bundle holds regular files only",
                                hint="replace it with a regular file, or move it out of the bundle")
            out.append(path.relative_to(root).as_posix())
    return sorted(out)


def pack_bundle(root: Path) -> Packed:
    """The deterministic `.botz` bytes of the bundle directory ``root`` (see the module doc)."""
    members = bundle_members(root)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in members:
            path = root / rel
            data = read_bounded(path, "bundle member", SOURCE_LIMIT)
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    data = out.getvalue()
    if len(data) > ARCHIVE_LIMIT.bytes():
        raise PackError(f"the packed bundle is {len(data)} bytes, over the .botz limit of {ARCHIVE_LIMIT.bytes()}",
                        hint=f"raise {ARCHIVE_LIMIT.env}, or move large files out of the bundle")
    return Packed(data=data, members=members)
