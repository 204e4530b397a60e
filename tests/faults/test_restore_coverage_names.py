"""Names a rewind used to lose or crash on: not UTF-8, 240+ bytes, with a backslash (in place)."""

from __future__ import annotations

import os
from pathlib import Path

from .coverage_harness import cli, run_and_rewind, setup

LATIN1 = b"caf\xe9.txt"  # a user's file, named in latin-1: not UTF-8
CREATED = b"new-\xff\xfe.bin"  # a file the node creates, named with bytes that are not UTF-8


def test_non_utf8_names_come_back_as_bytes(repo: Path, tmp_path: Path) -> None:
    root = os.fsencode(str(repo))
    with open(root + b"/" + LATIN1, "wb") as f:
        f.write(b"the user's bytes\n")
    os.makedirs(root + b"/d\xe8p", exist_ok=True)
    with open(root + b"/d\xe8p/inner.txt", "wb") as f:
        f.write(b"inside a non-UTF-8 directory\n")
    setup(repo, tmp_path, f"""
        os.unlink({LATIN1!r})
        with open(b"d\\xe8p/inner.txt", "wb") as f:
            f.write(b"rewritten by the node\\n")
        with open({CREATED!r}, "wb") as f:
            f.write(b"node output\\n")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    with open(root + b"/" + LATIN1, "rb") as f:
        assert f.read() == b"the user's bytes\n"
    with open(root + b"/d\xe8p/inner.txt", "rb") as f:
        assert f.read() == b"inside a non-UTF-8 directory\n"
    assert not os.path.lexists(root + b"/" + CREATED)
    # reported with a printable name and the exact bytes beside it, in --json and the event
    shown = {"caf\\xe9.txt": LATIN1.hex(), "d\\xe8p/inner.txt": b"d\xe8p/inner.txt".hex(),
             "new-\\xff\\xfe.bin": CREATED.hex()}
    assert set(r.files["restored"]) == {"caf\\xe9.txt", "d\\xe8p/inner.txt"}
    assert r.files["removed"] == ["new-\\xff\\xfe.bin"]
    assert r.files["raw_paths"] == shown
    assert r.event["files_raw_paths"] == shown and set(r.event["files_restored"]) == set(r.files["restored"])
    assert r.files["skipped"] == []
    assert "rewound run" in r.text  # the text report prints them (a second rewind: nothing to do)
    # the node's damage again on disk: the preview (the real rewind's plan) names it literally
    os.unlink(root + b"/" + LATIN1)
    with open(root + b"/" + CREATED, "wb") as f:
        f.write(b"node output\n")
    code, out, err = cli(repo, tmp_path / "store", "rewind", "--run-id", r.run_id, "--node", "damage", "--dry-run")
    assert code == 0 and "would be restored caf\\xe9.txt" in out and "would be removed new-\\xff\\xfe.bin" in out, \
        (out, err)


def test_names_of_250_bytes_are_restored(repo: Path, tmp_path: Path) -> None:
    long_name = "n" * 246 + ".txt"  # 250 bytes: a temporary name built on it would pass NAME_MAX
    (repo / "deep").mkdir()
    (repo / "deep" / long_name).write_bytes(b"original\n")
    os.chmod(repo / "deep" / long_name, 0o640)
    other = "\u00e9" * 125  # 250 bytes of UTF-8
    (repo / other).write_bytes(b"two-byte characters\n")
    setup(repo, tmp_path, f"""
        open("deep/{long_name}", "wb").write(b"overwritten\\n")
        os.unlink({other!r})
        open("{"m" * 251}.new", "wb").write(b"created\\n")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    assert (repo / "deep" / long_name).read_bytes() == b"original\n"
    assert (repo / "deep" / long_name).stat().st_mode & 0o777 == 0o640
    assert (repo / other).read_bytes() == b"two-byte characters\n"
    assert not (repo / ("m" * 251 + ".new")).exists()
    assert set(r.files["restored"]) == {f"deep/{long_name}", other}
    assert r.files["removed"] == ["m" * 251 + ".new"] and r.files["skipped"] == []
    # no temporary file left behind
    assert sorted(os.listdir(repo / "deep")) == [long_name]


def test_names_with_a_backslash_are_restored(repo: Path, tmp_path: Path) -> None:
    (repo / "a\\b.txt").write_bytes(b"backslash is a plain byte on POSIX\n")
    (repo / "dir\\x").mkdir()
    (repo / "dir\\x" / "f").write_bytes(b"inside\n")
    setup(repo, tmp_path, r"""
        open("a\\b.txt", "wb").write(b"changed\n")
        os.unlink("dir\\x/f")
        open("c\\d.txt", "wb").write(b"new\n")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    assert (repo / "a\\b.txt").read_bytes() == b"backslash is a plain byte on POSIX\n"
    assert (repo / "dir\\x" / "f").read_bytes() == b"inside\n"
    assert not (repo / "c\\d.txt").exists()
    assert set(r.files["restored"]) == {"a\\b.txt", "dir\\x/f"} and r.files["removed"] == ["c\\d.txt"]
    assert "rewound run" in r.text and "Traceback" not in r.text
