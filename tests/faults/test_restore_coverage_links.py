"""A user file a node replaced by a symlink (into the workspace, or out of it): the link goes,
the file comes back, and nothing outside the workspace is written (in place)."""

from __future__ import annotations

import os
from pathlib import Path

from .coverage_harness import run_and_rewind, setup


def snapshot_tree(root: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.lstat().st_mode, p.read_bytes())
    return out


def test_a_file_replaced_by_a_symlink_comes_back_and_the_outside_is_untouched(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(b"outside file\n")
    (outside / "dir" / "x").write_bytes(b"outside dir content\n")
    before_outside = snapshot_tree(outside)
    (repo / "config.yml").write_bytes(b"user: config\n")
    os.chmod(repo / "config.yml", 0o600)
    (repo / "src").mkdir()
    (repo / "src" / "main.py").write_bytes(b"print('main')\n")
    os.chmod(repo / "src" / "main.py", 0o755)
    (repo / "data.csv").write_bytes(b"a,b\n")
    os.chmod(repo / "data.csv", 0o644)
    setup(repo, tmp_path, f"""
        os.unlink("config.yml")
        os.symlink({str(outside / "secret.txt")!r}, "config.yml")  # to a file outside
        os.unlink("src/main.py")
        os.symlink({str(outside / "dir")!r}, "src/main.py")  # to a directory outside
        os.unlink("data.csv")
        os.symlink("config.yml", "data.csv")  # to a path inside (itself a link going out)
        os.symlink({str(outside)!r}, "escape")  # a new link out of the workspace
        os.symlink("/", "root-link")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    for name, data, mode in (("config.yml", b"user: config\n", 0o600), ("src/main.py", b"print('main')\n", 0o755),
                             ("data.csv", b"a,b\n", 0o644)):
        p = repo / name
        assert not p.is_symlink() and p.read_bytes() == data, name
        assert p.stat().st_mode & 0o777 == mode, name
    assert not os.path.lexists(repo / "escape") and not os.path.lexists(repo / "root-link")
    assert snapshot_tree(outside) == before_outside  # nothing outside was written or removed
    assert set(r.files["restored"]) == {"config.yml", "src/main.py", "data.csv"}
    assert r.files["removed"] == ["escape", "root-link"] and r.files["skipped"] == []
    assert set(r.event["files_restored"]) == set(r.files["restored"])
