"""The substitution rule of dsl.md 5.3, end to end: what the shell (or the script) receives.

`command:`: a string is one quoted word, numbers and booleans too; a list of scalars is one word
per item (an empty list nothing); a map or a nested list is its JSON text as one word; a null
value leaves the marker; `{{!ref}}` is inserted unquoted. `script:`: python/node get JSON
literals; sh/bash, being shell text, follow the command rule.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import attack_vectors, only_run, outputs, recorded, run_cli, tool_vars, write_bot

SHAPES = """
    vars:
      py: string
      rec: string

    schema shapes:
      files: string[]
      empty: string[]
      meta: json
      nested: json
      nothing: json
      n: int
      ratio: float
      ok: bool
      quote: string
      words: string
      snippet: string

    agent make:
      model: "m"
      backend: "script"
      output: shapes
      user: "shapes"

    tool use:
      command: "{{vars.py}} {{vars.rec}} {{outputs.make.files}} -- {{outputs.make.empty}} -- {{outputs.make.meta}} {{outputs.make.nested}} {{outputs.make.n}} {{outputs.make.ratio}} {{outputs.make.ok}} {{outputs.make.quote}} {{outputs.make.nothing}} {{!outputs.make.words}}"

    tool raw:
      command: "{{!outputs.make.snippet}}"

    workflow w:
      entry: make
      make -> use
      use -> raw
      raw -> done
"""

VALUES = {"files": ["a.py", "b c.py", "it's"], "empty": [], "meta": {"k": "v w", "q": "it's"},
          "nested": [["x"], {"y": 1}], "nothing": None, "n": 3, "ratio": 1.5, "ok": True, "quote": "it's",
          "words": "one  two", "snippet": "printf '%s' \"$((1 + 2))\" > raw.txt && echo raw ran"}


def test_lists_maps_scalars_null_and_raw_in_a_command(tmp_path: Path, ws: Path, rec: Path) -> None:
    bot = write_bot(tmp_path / "src", SHAPES, {"make": {"*": {"output": VALUES}}})
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), *tool_vars(rec), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert [a.decode() for a in recorded(ws)] == [
        "a.py", "b c.py", "it's",              # a list of scalars: one word per item
        "--", "--",                            # an empty list: nothing at all
        '{"k":"v w","q":"it\'s"}',             # a map: its JSON text, one word
        '[["x"],{"y":1}]',                     # a list holding a list/map: JSON, one word
        "3", "1.5", "true",                    # numbers and booleans: quoted words
        "it's",                                # an embedded ' survives ('\'')
        "{{outputs.make.nothing}}",          # a null value leaves its marker as written
        "one", "two",                          # {{!ref}}: unquoted, so the shell splits it
    ]
    # {{!ref}} is re-read by the shell: the arithmetic and the redirection ran
    assert (ws / "raw.txt").read_text() == "3"
    assert outputs(store, only_run(store))["raw"]["stdout"] == "raw ran\n"


def test_a_python_script_gets_json_literals_and_a_sh_script_gets_shell_words(
        tmp_path: Path, ws: Path, markers: Path) -> None:
    hostile = attack_vectors(markers)["everything"] + '"); import os; os.system("touch ' + f'{markers}/py")  #'
    values = {"text": hostile, "files": ["a", "b c"], "meta": {"k": [1, 2.5, False]}, "n": 7, "none": None}
    bot = write_bot(tmp_path / "src", """
        schema bag:
          text: string
          files: string[]
          meta: json
          n: int
          none: json

        agent make:
          model: "m"
          backend: "script"
          output: bag
          user: "bag"

        tool py:
          language: python
          script:
            import json
            true, false, null = True, False, None  # JSON literals are Python names here
            got = [{{outputs.make.text}}, {{outputs.make.files}}, {{outputs.make.meta}}, {{outputs.make.n}}, {{outputs.make.none}}]
            open("py.json", "w").write(json.dumps(got))
            print({{!outputs.make.n}} + 1)

        tool shell:
          language: sh
          script:
            printf '%s' {{outputs.make.text}} > sh.txt
            printf '[%s]' {{outputs.make.files}} > sh-list.txt

        workflow w:
          entry: make
          make -> py
          py -> shell
          shell -> done
    """, {"make": {"*": {"output": values}}})
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert list(markers.iterdir()) == []
    assert json.loads((ws / "py.json").read_text()) == [hostile, ["a", "b c"], {"k": [1, 2.5, False]}, 7, None]
    assert outputs(store, only_run(store))["py"]["stdout"] == "8\n"  # {{!ref}} raw: the number itself
    assert (ws / "sh.txt").read_bytes() == hostile.encode()
    assert (ws / "sh-list.txt").read_text() == "[a][b c]"


def test_a_value_no_shell_word_can_carry_fails_the_node_and_runs_nothing(
        tmp_path: Path, ws: Path, markers: Path) -> None:
    """A NUL byte cannot be passed to a command: the node fails with TEMPLATE_FAILED naming the
    reference, instead of the text being cut at the NUL (or the CLI crashing)."""
    bot = write_bot(tmp_path / "src", f"""
        schema draft:
          text: string

        agent write:
          model: "m"
          backend: "script"
          output: draft
          user: "write"

        tool use:
          command: "echo {{{{outputs.write.text}}}} && touch {markers}/ran"

        workflow w:
          entry: write
          write -> use
          use -> done
    """, {"write": {"*": {"output": {"text": "a\x00b; touch x"}}}})
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws)
    assert p.returncode == 5, p.stderr  # failed_resumable
    assert "Traceback" not in p.stderr and "NUL" in p.stderr and "outputs.write.text" in p.stderr
    assert list(markers.iterdir()) == []
    doc = json.loads((store / "runs" / only_run(store) / "run.json").read_text())
    assert doc["failure_code"] == "TEMPLATE_FAILED"


def test_validate_accepts_raw_markers(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        vars:
          hook: string = "true"

        tool t:
          command: "{{!vars.hook}} && echo {{ !vars.hook }}"

        workflow w:
          entry: t
          t -> done
    """)
    p = run_cli("validate", str(bot), cwd=ws)
    assert p.returncode == 0, p.stdout + p.stderr
    bad = write_bot(tmp_path / "bad", """
        tool t:
          command: "{{!vars.nope}}"

        tool u:
          command: "echo {{!}}"

        workflow w:
          entry: t
          t -> u
          u -> done
    """)
    p = run_cli("validate", str(bad), cwd=ws)
    assert p.returncode == 2 and "C033" in p.stdout and "C004" in p.stdout, p.stdout


_TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.one_of(_TEXT, st.lists(_TEXT, max_size=4)))
def test_any_text_survives_sh_and_bash_exactly(value: str | list[str]) -> None:
    """Whatever the text, the shell hands the command exactly the substituted items."""
    from iterion.templates import render

    command = render("printf '%s\\0' {{vars.v}}", {"vars": {"v": value}}, "shell")
    items = [value] if isinstance(value, str) else value
    expected = b"".join(item.encode() + b"\0" for item in items) or b"\0"  # printf runs once with no args
    for shell in ("/bin/sh", "bash"):
        got = subprocess.run([shell, "-c", command], capture_output=True, timeout=30, check=True).stdout
        assert got == expected, (shell, command)
