"""What git already knows about a workspace: its index entries, its object database, and the
pins that keep every blob a run references alive.

An in-place run whose workspace lies in a git repository records file content by git blob id
(``Manifest.ids == "git"``): the sha1 of ``blob <size>\\0<bytes>``, the id git itself gives
the same bytes. Three sources, cheapest first:

1. the file's stat matches its index entry and the entry is not racily clean (the entry's mtime
   is older than the index file's: git's own rule) -> the entry's blob id, the file unread;
2. the file is read and its blob id is in the object database -> recorded by reference;
3. otherwise the bytes are copied into the tracker's object store, named by the same blob id.

Only (3) costs store space. (1) is used only when no attribute or config can make the index
blob differ from the working-tree bytes (clean/smudge filters, LFS, eol and text conversion,
ident, working-tree-encoding, ``core.autocrlf``): with any of those in play the shortcut is
off and every file goes through (2), where equality of bytes is proven by the hash itself.

INVARIANT (nothing a run references is ever lost to git's gc): a blob id enters a manifest only
after it is reachable from ``refs/iterion/pins/<run>``. Each capture that produced new
references (``GitSource.seal``, before the capture returns, hence before its manifest is
committed or its stat rows cached) writes a pin commit whose tree holds ``index`` (the tree of
the very index bytes the capture read, built from a private copy: the real index is never
written) and ``extra`` (the blobs found by content), with the previous pin as parent, then
points the ref at it and makes both durable. Rows reused from the stat cache were produced by
an earlier capture of the same run, already sealed into the same chain. After the ref is
written each blob found by content is checked again: one a concurrent ``git gc --prune=now``
removed in between fails the capture (nothing recorded) instead of being referenced. The
user's ``git commit --amend``, rebase, reset or gc therefore cannot remove a pinned blob;
only ``iterion gc`` drops a pin, together with the run that needed it. Git's index, HEAD and
branches are never touched: no ``git add``, objects and one ref under ``refs/iterion/pins/``
only.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gitrefs.persist import sync_paths
from workspacetrack.errors import TrackError
from workspacetrack.fastext import FAST
from workspacetrack.models import CacheRow, StatKey

# the index's entries loop in C (workspacetrack/_fastwalk.c); None: its Python twin below
_fast: ModuleType | None = FAST

if TYPE_CHECKING:
    import pygit2

PIN_PREFIX = "refs/iterion/pins/"
REUSE_ENV = "ITERION_TRACK_GIT_REUSE"  # "0": record new runs by blake3, as before git reuse
_ENTRY = struct.Struct(">10I20sH")
_NO_HASH = bytes(20)  # the trailer of an index written with index.skipHash
# Attribute words that may make a blob differ from the working-tree bytes ("-text"/"binary" do not).
_CONVERTING = frozenset({b"filter", b"text", b"eol", b"crlf", b"ident", b"working-tree-encoding"})
_HEX40 = re.compile(r"^[0-9a-f]{40}$")

# rel path -> (size mod 2^32, mtime_ns, ctime_ns, inode mod 2^32, blob id)
IndexEntry = tuple[int, int, int, int, str]
IndexRows = dict[str, IndexEntry]


def index_row(ix: IndexEntry | None, key: StatKey, threshold: int) -> CacheRow | None:
    """The stat-cache row git's index entry ``ix`` vouches for, for a regular file whose lstat
    is ``key``: the entry's blob id, the file unread, when the entry's stat (size and inode
    truncated to 32 bits, as git keeps them; mtime and ctime to the nanosecond) is the file's;
    trusted when the file is older than ``threshold``. None otherwise. (``_fastwalk``'s
    ``ixent_row`` is the same rule in C.)"""
    if (ix is not None and ix[1] == key[1] and ix[0] == key[0] & 0xFFFFFFFF
            and ix[2] == key[2] and ix[3] == key[3] & 0xFFFFFFFF):
        return (key, ix[4], (key[1] if key[1] > key[2] else key[2]) < threshold, None)
    return None


class IndexView:
    """git's index as a capture asks it: the row a file's stat vouches for (``index_row``).

    Held as ``_fastwalk``'s table when the extension is built (the walk looks paths up by their
    bytes: no Python object per entry it does not take, ~30 ms of a 100,000-file cold capture),
    else as the ``IndexRows`` dict of the Python reader."""

    def __init__(self, rows: IndexRows | None = None, table: object | None = None) -> None:
        self.rows, self.table = rows, table

    def row(self, rel: str, key: StatKey, threshold: int) -> CacheRow | None:
        if self.table is not None:
            assert _fast is not None
            return _fast.index_row(self.table, os.fsencode(rel), key, threshold)  # type: ignore[no-any-return]
        assert self.rows is not None
        return index_row(self.rows.get(rel), key, threshold)

    def vouches(self, rel: str, row: CacheRow) -> bool:
        """Whether ``row`` is what the walk's index shortcut would make again for ``rel``: a
        regular file with its entry's stat and blob id."""
        key = row[0]
        if key[4] & 0o170000 != 0o100000:
            return False
        made = self.row(rel, key, 0)
        return made is not None and made[1] == row[1]

    def beyond(self, rows: dict[str, CacheRow]) -> dict[str, CacheRow]:
        """The rows of ``rows`` (path -> stat-cache row) this index does not vouch for
        (``vouches``), in one pass in C over a table."""
        if self.table is not None:
            assert _fast is not None
            return _fast.index_beyond(self.table, rows)  # type: ignore[no-any-return]
        vouches = self.vouches
        return {p: row for p, row in rows.items() if not vouches(p, row)}

    def all_rows(self) -> IndexRows:
        if self.table is not None:
            assert _fast is not None
            return _fast.table_rows(self.table)  # type: ignore[no-any-return]
        assert self.rows is not None
        return self.rows


def git_reuse_enabled() -> bool:
    return os.environ.get(REUSE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def pin_ref(run_id: str) -> str:
    return PIN_PREFIX + run_id


def blob_hasher(size: int) -> hashlib._Hash:
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % size)
    return h


def blob_id(data: bytes) -> str:
    h = blob_hasher(len(data))
    h.update(data)
    return h.hexdigest()


def is_blob_id(oid: str) -> bool:
    return bool(_HEX40.match(oid))


def common_dir(git_dir: Path) -> Path:
    """The repository's shared directory (objects, refs) for a possibly linked worktree."""
    try:
        rel = (git_dir / "commondir").read_text().strip()
    except OSError:
        return git_dir
    return (git_dir / rel).resolve()


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    c = buf[pos]
    pos += 1
    val = c & 127
    while c & 128:
        c = buf[pos]
        pos += 1
        val = ((val + 1) << 7) | (c & 127)
    return val, pos


def parse_index(data: bytes, prefix: bytes, racy_ns: int,
                attributes: list[bytes] | None = None, root_tree: list[str] | None = None) -> IndexRows | None:
    """``parse_index_view`` as the ``IndexRows`` dict (the Python reader's shape)."""
    view = parse_index_view(data, prefix, racy_ns, attributes, root_tree, table=False)
    return view.rows if view is not None else None


def parse_index_view(data: bytes, prefix: bytes, racy_ns: int, attributes: list[bytes] | None = None,
                     root_tree: list[str] | None = None, *, table: bool = True) -> IndexView | None:
    """Stage-0 regular-file entries of index bytes ``data`` under ``prefix`` (b"" or b"dir/"),
    keyed by the path below it; entries whose mtime is not older than ``racy_ns`` (the index
    file's mtime), assume-valid, skip-worktree or intent-to-add ones are left out (their stat
    vouches for nothing). None: a format this reader does not take (split index, sha256).
    ``attributes`` receives the repository path of every tracked ``.gitattributes``;
    ``root_tree`` the id of the whole index's tree when its cache-tree extension holds it valid
    (``git commit`` leaves it so; staging a path invalidates it). A damaged index (its SHA-1
    trailer does not match, as git checks on every read; truncated; a length that runs past its
    end) is None too: the walk then reads the files themselves rather than trust a blob id a
    flipped bit could have changed. An all-zero trailer is git's ``index.skipHash``."""
    trailer = data[-20:]
    if len(data) >= 32 and trailer != _NO_HASH and hashlib.sha1(data[:-20], usedforsecurity=False).digest() != trailer:
        return None
    try:
        return _parse_index(data, prefix, racy_ns, attributes, root_tree, table and _fast is not None)
    except (struct.error, IndexError, ValueError):
        if attributes is not None:
            attributes.clear()
        if root_tree is not None:
            root_tree.clear()
        return None


def _parse_index(data: bytes, prefix: bytes, racy_ns: int, attributes: list[bytes] | None,
                 root_tree: list[str] | None, table: bool) -> IndexView | None:
    if len(data) < 32 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        return None
    fast = _fast
    if fast is not None:
        parsed = fast.index_entries(data, prefix, racy_ns, count, version, attributes is not None, table)
        if parsed is None:
            return None
        got, pos, attrs = parsed
        out = IndexView(table=got) if table else IndexView(rows=got)
        if attributes is not None and attrs:
            attributes.extend(attrs)
    else:
        found = _index_entries(data, prefix, racy_ns, count, version, attributes)
        if found is None:
            return None
        out, pos = IndexView(rows=found[0]), found[1]
    if len(data) - pos < 20:
        return None  # no room for the trailer: a damaged (truncated) index
    # extensions: a split index keeps its entries elsewhere; this reader does not follow it
    while pos + 8 <= len(data) - 20:
        sig = data[pos:pos + 4]
        (n,) = struct.unpack_from(">I", data, pos + 4)
        if sig == b"link":
            return None
        if sig == b"TREE" and root_tree is not None and data[pos + 8:pos + 9] == b"\0":
            # the root entry: "" NUL entry_count SP subtrees LF [oid if entry_count >= 0]
            nl = data.find(b"\n", pos + 9, pos + 8 + n)
            head = data[pos + 9:nl].split(b" ") if nl > 0 else []
            if len(head) == 2 and head[0].isdigit() and nl + 21 <= pos + 8 + n:
                root_tree.append(data[nl + 1:nl + 21].hex())
        pos += 8 + n
    return out



def _index_entries(data: bytes, prefix: bytes, racy_ns: int, count: int, version: int,
                   attributes: list[bytes] | None) -> tuple[IndexRows, int] | None:
    """The entries of index bytes ``data`` (``parse_index``'s rules) and the offset after the
    last one; None for a format this reader does not take. The Python twin of
    ``_fastwalk.index_entries``; raises on a malformed index (``parse_index`` catches)."""
    out: IndexRows = {}
    pos = 12
    prev = b""
    unpack = _ENTRY.unpack_from
    plen = len(prefix)
    enc, errs = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    find = data.index
    for _ in range(count):
        cs, cns, ms, mns, _dev, ino, mode, _uid, _gid, size, oid, flags = unpack(data, pos)
        start = pos
        pos += 62
        skip = flags & 0xB000  # assume-valid or a conflict stage
        if flags & 0x4000:
            if version < 3:
                return None
            skip |= data[pos] & 0x60  # skip-worktree, intent-to-add (high byte of the extension)
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            if strip > len(prev):
                raise ValueError("index entry drops more of the previous name than it has")
            end = find(b"\0", pos)
            name = prev[:len(prev) - strip] + data[pos:end]
            pos = end + 1
            prev = name
        else:
            nlen = flags & 0xFFF
            if nlen == 0xFFF:
                nlen = find(b"\0", pos) - pos
            if pos + nlen > len(data):
                raise ValueError("index entry name runs past the end")
            name = data[pos:pos + nlen]
            pos = start + ((pos - start + nlen + 8) & ~7)
        if name[-14:] == b".gitattributes" and attributes is not None and (
                len(name) == 14 or name[-15:-14] == b"/"):
            attributes.append(name)
        if skip or mode >> 12 != 0o10:
            continue
        mtime = ms * 1_000_000_000 + mns
        if mtime >= racy_ns:
            continue
        if plen:
            if not name.startswith(prefix):
                continue
            name = name[plen:]
        out[name.decode(enc, errs)] = (size, mtime, cs * 1_000_000_000 + cns, ino, oid.hex())
    return out, pos


class GitSource:
    """One workspace's repository, opened lazily: index rows, blob reads, pins."""

    def __init__(self, repo: pygit2.Repository, workspace: Path, run_id: str) -> None:
        self.repo = repo
        self.git_dir = Path(repo.path)
        self.common = common_dir(self.git_dir)
        self.workdir = Path(repo.workdir).resolve()
        rel = workspace.relative_to(self.workdir).as_posix()
        self.prefix = b"" if rel in ("", ".") else os.fsencode(rel) + b"/"
        self.run_id = run_id
        self._index_key: tuple[int, int, int] | None = None
        self._index_view: IndexView | None = None
        self._index_bytes: bytes | None = None
        self._index_root: str | None = None  # its tree, from its valid cache-tree extension
        self._filters_key: tuple[object, ...] | None = None
        self._filters_safe = False
        # what the current capture referenced that no pin holds yet
        self._use_index: bytes | None = None
        self._index_used: IndexView | None = None  # its rows (all pinned one by one if it makes no tree)
        self._used_root: str | None = None  # and its tree, when its cache-tree names it
        self._extra: set[str] = set()
        self._pinned_index: bytes | None = None  # sha1 trailer of the index last pinned

    @classmethod
    def open(cls, workspace: Path, run_id: str) -> GitSource | None:
        """The repository holding ``workspace`` when its content can be shared with git (a
        sha1 repository with a work tree containing it), else None."""
        import pygit2

        try:
            found = pygit2.discover_repository(str(workspace))
            if found is None:
                return None
            repo = pygit2.Repository(found)
        except (pygit2.GitError, OSError, KeyError):
            return None
        if repo.is_bare or repo.workdir is None:
            return None
        try:
            fmt = repo.config["extensions.objectformat"]
        except (KeyError, pygit2.GitError):
            fmt = "sha1"
        if str(fmt).lower() != "sha1":
            return None
        try:
            return cls(repo, workspace, run_id)
        except ValueError:
            return None

    # -- the index ---------------------------------------------------------------------------
    def index_view(self) -> IndexView | None:
        """The current index as the rows a stat can vouch for, or None when the shortcut is off."""
        path = self.git_dir / "index"
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._index_key:
            try:
                data = path.read_bytes()
            except OSError:
                return None
            attrs: list[bytes] = []
            root: list[str] = []
            rows = parse_index_view(data, self.prefix, st.st_mtime_ns, attrs, root)
            self._index_root = root[0] if root and rows is not None else None
            if rows is not None and any(_converting(self.workdir / os.fsdecode(a)) for a in attrs):
                rows = None
            self._index_view = rows
            self._index_bytes = data if rows is not None else None
            self._index_key = key
        if self._index_view is None or not self.config_is_safe():
            return None
        return self._index_view

    def index_checksum(self) -> str | None:
        """Hex of the trailer of the index ``index_view`` last returned (its identity)."""
        return self._index_bytes[-20:].hex() if self._index_bytes is not None else None

    def used_index(self) -> None:
        """Rows of this capture took blob ids from the index ``index_view`` last returned: pin
        that index's tree at ``seal`` (called once per capture, not per row)."""
        if self._use_index is None and self._index_bytes is not None:
            self._use_index = self._index_bytes
            self._index_used = self._index_view
            self._used_root = self._index_root

    def config_is_safe(self) -> bool:
        """No config or attribute file outside the index converts content on its way into git."""
        paths = [self.git_dir / "info" / "attributes", self.common / "info" / "attributes",
                 Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / "attributes",
                 Path("/etc/gitattributes"), self.workdir / ".gitattributes"]
        cfg = self.repo.config
        extra = _config(cfg, "core.attributesfile")
        if extra:
            paths.append(Path(os.path.expanduser(extra)))
        autocrlf = (_config(cfg, "core.autocrlf") or "false").lower()
        key: tuple[object, ...] = (autocrlf, *(_stamp(p) for p in paths))
        if key != self._filters_key:
            safe = autocrlf in ("false", "0", "no", "off", "")
            self._filters_safe = safe and not any(_converting(p) for p in paths)
            self._filters_key = key
        return self._filters_safe

    # -- the object database -----------------------------------------------------------------
    def has(self, oid: str) -> bool:
        import pygit2

        try:
            return self.repo.odb.exists(pygit2.Oid(hex=oid))
        except (ValueError, pygit2.GitError):
            return False

    def read(self, oid: str) -> bytes | None:
        import pygit2

        try:
            kind, data = self.repo.odb.read(pygit2.Oid(hex=oid))
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if kind != pygit2.enums.ObjectType.BLOB:
            return None
        return bytes(data)

    def referenced(self, oid: str) -> None:
        """``oid`` (found by content) will be recorded: pin it at ``seal``."""
        self._extra.add(oid)

    # -- pins --------------------------------------------------------------------------------
    def seal(self) -> None:
        """Make every blob this capture referenced reachable from the run's pin ref, durably."""
        index = self._use_index
        if index is not None and self._pinned_index is None:
            self._pinned_index = self._head_pinned_index()  # a new process: what the chain holds
        if index is not None and index[-20:] == self._pinned_index:
            index = None
        if index is None and not self._extra:
            self._use_index = None
            self._index_used = self._used_root = None
            return
        import pygit2

        repo = self.repo
        ref = pin_ref(self.run_id)
        written: list[pygit2.Oid] = []
        root = repo.TreeBuilder()
        index_tree = self._index_tree(index) if index is not None else None
        if index is not None:
            if index_tree is not None:
                root.insert("index", index_tree, pygit2.enums.FileMode.TREE)
                written.append(index_tree)
            else:  # an unmerged index, say: the blobs it vouched for are pinned one by one
                used = self._index_used.all_rows() if self._index_used is not None else {}
                self._extra.update(row[4] for row in used.values())
        extra = sorted(self._extra)
        if extra:
            tb = repo.TreeBuilder()
            for oid in extra:
                tb.insert(oid, pygit2.Oid(hex=oid), pygit2.enums.FileMode.BLOB)
            tree = tb.write()
            root.insert("extra", tree, pygit2.enums.FileMode.TREE)
            written.append(tree)
        root_id = root.write()
        written.append(root_id)
        parent = repo.references.get(ref)
        parents = [parent.target] if parent is not None else []
        sig = pygit2.Signature("iterion", "iterion@localhost", 0, 0)
        msg = f"iterion pin of run {self.run_id}\n\nindex {index[-20:].hex() if index else '-'}\n"
        commit = repo.create_commit(None, sig, sig, msg, root_id, parents)
        written.append(pygit2.Oid(hex=str(commit)))
        self._fsync_object(*written)
        repo.references.create(ref, commit, force=True)
        ref_file = self.common / ref
        _fsync_file(ref_file, self.common)
        gone = [o for o in extra if not self.has(o)]
        if gone:
            raise TrackError(f"git object {gone[0]} vanished while this capture referenced it "
                             "(a `git gc --prune=now` ran at the same time)",
                             hint="retry; nothing was recorded")
        if index is not None and index_tree is not None:
            self._pinned_index = index[-20:]
        self._use_index = None
        self._index_used = self._used_root = None
        self._extra.clear()

    def _head_pinned_index(self) -> bytes | None:
        """The checksum of the index the run's newest pin holds (its commit message says)."""
        import pygit2

        try:
            ref = self.repo.references.get(pin_ref(self.run_id))
            if ref is None:
                return None
            commit = self.repo.get(ref.target)
            if not isinstance(commit, pygit2.Commit):
                return None
            for line in commit.message.splitlines():
                if line.startswith("index ") and len(line) == 46:
                    return bytes.fromhex(line[6:])
        except (pygit2.GitError, KeyError, ValueError, AttributeError):
            return None
        return None

    def _index_tree(self, data: bytes) -> pygit2.Oid | None:
        """The tree of index bytes ``data``, written from a private copy (the real index, its
        cache-tree included, is never written). None if the index cannot make a tree (an
        unmerged index, say)."""
        import pygit2

        if self._used_root is not None and self.has(self._used_root):
            # git's cache-tree already names it (after a commit, say): no 100,000-entry re-read
            return pygit2.Oid(hex=self._used_root)
        tmp = self.common / f"iterion-pin-index.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            tmp.write_bytes(data)
            idx = pygit2.Index(str(tmp))
            return idx.write_tree(self.repo)
        except (pygit2.GitError, OSError, ValueError):
            return None
        finally:
            tmp.unlink(missing_ok=True)

    def _fsync_object(self, *oids: pygit2.Oid) -> None:
        """The loose objects among ``oids`` (a packed one is durable already), data and names, in
        one batch (``gitrefs.persist.sync_paths``) whose commit file goes in the git dir's root, never
        inside objects/xx where git would take it for an object."""
        paths = [p for p in (self.common / "objects" / str(o)[:2] / str(o)[2:] for o in oids) if p.exists()]
        sync_paths([str(p) for p in paths], [str(p.parent) for p in paths], journal_dir=str(self.common),
                   dummy_prefix=_SYNC_PREFIX)


def _config(cfg: pygit2.Config, name: str) -> str | None:
    try:
        return str(cfg[name])
    except Exception:  # noqa: BLE001 - pygit2 raises KeyError or GitError when unset
        return None


# the batch commit's short-lived file in the git dir's root (see ``_fsync_object``)
_SYNC_PREFIX = "iterion-pin-sync"


def _fsync_file(path: Path, gitdir: Path) -> None:
    """``path`` (a ref file just written) and its name in its directory, durably: one batch whose
    commit file goes in ``gitdir``'s root, never in a refs directory git would list."""
    sync_paths([str(path)], [str(path.parent)], journal_dir=str(gitdir), dummy_prefix=_SYNC_PREFIX)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _converting(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    for line in data.splitlines():
        line = line.strip()
        if not line or line.startswith(b"#"):
            continue
        parts = line.split()
        if any(tok.split(b"=", 1)[0] in _CONVERTING for tok in parts[1:]):
            return True
    return False
