"""The one bounded reader (gitrefs.persist.inputs) and the data reader on top of it (iterion.datafile)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iterion.datafile import MAX_DEPTH, DataFileError, loads_json, loads_yaml, read_data
from gitrefs.persist.inputs import SOURCE_LIMIT, InputFileError, read_bounded


def test_regular_files_are_read_whole(tmp_path: Path) -> None:
    f = tmp_path / "a.bot"
    f.write_bytes(b"x" * 3000)
    assert read_bounded(f, "workflow file", SOURCE_LIMIT) == b"x" * 3000


def test_fifo_device_directory_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "FIFO"), (Path("/dev/zero"), "character device"), (tmp_path, "directory")):
        with pytest.raises(InputFileError) as err:
            read_bounded(path, "thing", SOURCE_LIMIT)
        assert kind in err.value.message and str(path) in err.value.message and err.value.exit_code == 2


def test_size_limit_names_path_size_limit_and_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "big.md"
    f.write_bytes(b"y" * 5000)
    monkeypatch.setenv("ITERION_MAX_SOURCE_BYTES", "4096")
    with pytest.raises(InputFileError) as err:
        read_bounded(f, "include file", SOURCE_LIMIT)
    msg = err.value.message
    assert str(f) in msg and "5000 bytes" in msg and "4096 bytes limit" in msg and "ITERION_MAX_SOURCE_BYTES" in msg


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    inside_strings = '{"a": "' + "[" * 500 + '", "b": "\\"{{{{"}'
    assert loads_json(inside_strings, "x")["a"] == "[" * 500
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    with pytest.raises(DataFileError, match="nests deeper than 100"):
        loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")


def test_yaml_recursive_alias_and_alias_depth_are_refused() -> None:
    with pytest.raises(DataFileError, match="recursive YAML alias"):
        loads_yaml("a: &a [*a]\n", "x")
    chain = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 120)]
    with pytest.raises(DataFileError, match="nests deeper than 100"):
        loads_yaml("\n".join(chain) + "\n", "x")
    assert loads_yaml("a: &a [1, 2]\nb: *a\n", "x") == {"a": [1, 2], "b": [1, 2]}


def test_read_data_picks_yaml_only_by_suffix(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("k: v\n")
    (tmp_path / "a.yml").write_text("k: v\n")
    with pytest.raises(DataFileError, match="not valid JSON"):
        read_data(tmp_path / "a.json", "answers file")
    assert read_data(tmp_path / "a.yml", "answers file") == {"k": "v"}
    with pytest.raises(DataFileError, match="does not exist"):
        read_data(tmp_path / "none.json", "answers file")
