"""`iterion lsp` publishes validate's diagnostics: for every fixture workflow (valid and
invalid), the same files, codes, severities, start positions and messages as
`iterion validate --json`, through a real LSP client over stdio."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lsprotocol import types as lsp

from tests.conftest import REPO_ROOT, run_cli
from tests.lsp.client import Session, run_session

FIXTURES = sorted(p for p in (REPO_ROOT / "fixtures").rglob("*") if p.suffix in (".bot", ".iter") and p.is_file())
Key = tuple[str, str, str, int, int, str]


def _utf16_col(path: str, line: int, column: int) -> int:
    text = Path(path).read_bytes().decode("utf-8", "replace")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    row = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(row[: column - 1].encode("utf-16-le")) // 2


def _expected() -> dict[str, set[Key]]:
    proc = run_cli("validate", "--json", *map(str, FIXTURES), cwd=REPO_ROOT)
    assert proc.returncode in (0, 2), proc.stderr
    out: dict[str, set[Key]] = {}
    for f in json.loads(proc.stdout)["files"]:
        out[str(Path(f["path"]).resolve())] = {
            (str(Path(d["file"]).resolve()), d["code"], d["severity"], d["line"] - 1,
             _utf16_col(d["file"], d["line"], d["column"]),
             f"{d['code']} {d['severity']}: {' '.join(d['message'].split())}")
            for d in f["diagnostics"]}
    return out


def test_diagnostics_equal_validate_for_every_fixture_workflow() -> None:
    expected = _expected()
    assert len(expected) == len(FIXTURES) > 200

    async def body(s: Session) -> dict[str, set[Key]]:
        got: dict[str, set[Key]] = {}
        for path in FIXTURES:
            s.diagnostics.clear()
            uri = await s.open(path)
            keys: set[Key] = set()
            for target, diags in s.diagnostics.items():
                file = str(Path(target.removeprefix("file://")).resolve())
                for d in diags:
                    sev = "error" if d.severity == lsp.DiagnosticSeverity.Error else "warning"
                    keys.add((file, str(d.code), sev, d.range.start.line, d.range.start.character,
                              " ".join(d.message.split("\n")[0].split())))
            got[str(path.resolve())] = keys
            await s.close(uri)
        return got

    got = run_session(body, REPO_ROOT)
    mismatched = {f: (expected[f] ^ got[f]) for f in expected if expected[f] != got[f]}
    assert not mismatched, mismatched
    # the comparison saw both kinds: clean files and every invalid fixture's code
    assert any(not v for v in expected.values())
    assert all(got[str(p.resolve())] for p in FIXTURES if "invalid" in p.parts)


def test_an_edit_republishes_and_a_fix_clears(tmp_path: Path) -> None:
    src = (REPO_ROOT / "fixtures" / "workflows" / "review_loop.bot").read_text()
    path = tmp_path / "w.bot"
    path.write_text(src)

    async def body(s: Session) -> list[list[str]]:
        uri = await s.open(path)
        seen = [[str(d.code) for d in s.diagnostics[uri]]]
        await s.change(uri, src.replace("write -> critic", "write -> critc"))  # unsaved: the buffer counts
        seen.append([str(d.code) for d in s.diagnostics[uri]])
        await s.change(uri, src)
        seen.append([str(d.code) for d in s.diagnostics[uri]])
        return seen

    clean, broken, fixed = run_session(body, tmp_path)
    assert clean == [] and "C001" in broken and fixed == []
    assert path.read_text() == src  # the server never writes the file


def test_the_lsp_command_is_listed_and_ends_with_its_input() -> None:
    proc = run_cli("--help", cwd=REPO_ROOT, env={"COLUMNS": "200"})
    assert "lsp" in proc.stdout and "language server" in proc.stdout
    ended = run_cli("lsp", cwd=REPO_ROOT, input="", timeout=60)  # the editor went away: stdin at EOF
    assert ended.returncode == 0 and ended.stdout == "", ended.stderr


def test_an_open_imported_fragment_counts_as_on_screen(tmp_path: Path) -> None:
    shutil.copytree(REPO_ROOT / "fixtures" / "workflows" / "imports", tmp_path / "imports")
    main, nodes = tmp_path / "imports" / "main.bot", tmp_path / "imports" / "lib" / "nodes.bot"
    text = nodes.read_text()
    renamed = text.replace("agent analyse:", "agent analyze:")
    main_uri, nodes_uri = main.resolve().as_uri(), nodes.resolve().as_uri()

    def codes(s: Session, uri: str) -> list[str]:
        return [f"{d.code}:{d.range.start.line}" for d in s.diagnostics.get(uri, [])]

    async def body(s: Session) -> list[list[str]]:
        seen = []
        await s.open(main)
        seen.append(codes(s, main_uri))
        s.diagnostics.clear()
        await s.change(main_uri, main.read_text().replace("entry: analyse", "entry: analyze"))
        seen += [codes(s, main_uri), codes(s, nodes_uri)]  # main's error; nodes.bot (closed) has none
        await s.change(main_uri, main.read_text())
        await s.open(nodes, text)
        seen.append(codes(s, nodes_uri))  # its own analysis: what `validate lib/nodes.bot` says
        await s.change(nodes_uri, renamed)  # unsaved: main imports the buffer, not the disk
        seen += [codes(s, main_uri), codes(s, nodes_uri)]
        await s.close(nodes_uri)
        await s.barrier(main_uri)
        seen += [codes(s, main_uri), codes(s, nodes_uri)]  # closed: the disk counts again
        return seen

    (first, edited, fragment_closed, fragment_alone, after_rename, fragment_own,
     after_close, fragment_after) = run_session(body, tmp_path)
    assert first == [] and edited == ["C008:5"] and fragment_closed == []
    assert fragment_alone == ["C006:0"] and fragment_own == ["C006:0"]
    assert after_rename == ["C008:5", "C001:6", "C001:7"]  # entry and edges name 'analyse'
    assert after_close == [] and fragment_after == []
    assert nodes.read_text() == text
