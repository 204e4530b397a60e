"""A diagnostic stays one `file:line:col: CODE severity: message` line whatever the file is named
(a newline, an escape sequence, a byte that is not UTF-8): one_line (gitrefs/persist/text.py) escapes it."""

from __future__ import annotations

import os
from pathlib import Path

from iterion.dsl import load_workflow
from gitrefs.persist.text import one_line


def test_one_line_escapes_control_characters_and_undecodable_bytes_only() -> None:
    assert one_line("plain name, with spaces [x] $(y).bot") == "plain name, with spaces [x] $(y).bot"
    assert one_line("a\nb\r\t\x1b[31m" + os.fsdecode(b"\xff")) == "a\\nb\\r\\t\\x1b[31m\\udcff"


def test_a_diagnostic_for_a_hostile_file_name_is_one_line(tmp_path: Path) -> None:
    for raw in (b"a\nb.bot", b"c\x1b[31m.bot", b"x\xff.bot"):
        path = tmp_path / os.fsdecode(raw)
        path.write_bytes(b"workflow w:\n  entry: nowhere\n" if raw != b"x\xff.bot" else b"\xff\xfe")
        result = load_workflow(path)
        assert not result.ok
        for d in result.diagnostics:
            head = d.format().split("\n  hint: ")[0]
            assert "\n" not in head and "\x1b" not in head and head.startswith(one_line(str(path)) + ":"), head
