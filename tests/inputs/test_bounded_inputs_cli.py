"""Bounded inputs (issue 10, point 4; answers-file cases of point 5), through the real CLI.

Every refusal: the documented exit code (2 bad input; 1 for a workflow with diagnostics),
exactly one ``error:`` line on stderr, no traceback, and the store byte-for-byte unchanged.
FIFOs are real (``os.mkfifo``) and ``/dev/zero`` is the real device: a reader that waited on or
read them would hit the subprocess timeout instead of returning.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import make_checkout, restore_template, run_cli, save_template, store_fingerprint, write_bot

GATE = """
vars:
  ratio: float = 0.5
  blob: json = "{}"

schema answer:
  approved: bool
  note: string

human gate:
  output: answer
  instructions: "approve?"

tool after:
  command: "echo after"

workflow gated:
  entry: gate
  gate -> after when approved
  gate -> done when not approved
  after -> done
"""

TIMEOUT = 60  # a FIFO that is waited on, or /dev/zero read forever, fails the test here


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"ITERION_STORE_DIR": "", **(env or {})}, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def _paused_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, tuple[Path, Path, str]]:
    """The paused run, launched once per module and worker: (template, live, what ``setup`` gives)."""
    base = tmp_path_factory.mktemp("bounded")
    live = base / "live"
    live.mkdir()
    ws = make_checkout(live / "ws")
    store = live / "store"
    bot = write_bot(ws, GATE, name="gated")
    p = cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    save_template(live, base / "template")
    return base / "template", live, (ws, store, json.loads(p.stdout)["run_id"])


@pytest.fixture
def setup(_paused_template: tuple[Path, Path, tuple[Path, Path, str]]) -> tuple[Path, Path, str]:
    """(workspace, store, id of a run paused on its human gate): a store with real content, a fresh
    byte-identical copy per test at the paths the run recorded."""
    template, live, paused = _paused_template
    restore_template(template, live)
    return paused


def refused(p: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one ``error:`` line of a refusal (asserting the exit code and the single line)."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return errors[0]


def refused_unchanged(store: Path, argv: list[str], cwd: Path, code: int = 2,
                      env: dict[str, str] | None = None) -> str:
    before = store_fingerprint(store)
    line = refused(cli(*argv, "--store-dir", str(store), cwd=cwd, env=env), code)
    assert store_fingerprint(store) == before
    return line


# -- workflow files ----------------------------------------------------------------------------
def test_run_of_a_fifo_workflow_is_refused_at_once(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    fifo = ws / "pipe.bot"
    os.mkfifo(fifo)
    line = refused_unchanged(store, ["run", str(fifo)], ws)
    assert "pipe.bot" in line and "FIFO" in line and "not a regular file" in line


def test_run_of_dev_zero_is_refused_at_once(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    line = refused_unchanged(store, ["run", "/dev/zero"], ws)
    assert "/dev/zero" in line and "character device" in line


def test_validate_and_diagram_report_a_fifo_as_l001(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    fifo = ws / "pipe.bot"
    os.mkfifo(fifo)
    p = cli("validate", str(fifo), cwd=ws)
    assert p.returncode == 2 and "L001" in p.stdout and "FIFO" in p.stdout, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    d = cli("diagram", str(fifo), cwd=ws)
    assert "does not compile" in refused(d, 2)


def test_oversized_workflow_names_path_size_and_limit(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    big = write_bot(ws, GATE + "## " + "x" * 4000 + "\n", name="big")
    line = refused_unchanged(store, ["run", str(big)], ws, env={"ITERION_MAX_SOURCE_BYTES": "2000"})
    size = big.stat().st_size
    assert "big.bot" in line and f"{size} bytes" in line and "2000 bytes limit" in line


def test_workflow_over_the_default_cap_gets_the_languages_code_and_fix(setup: tuple[Path, Path, str]) -> None:
    """Over the reader's default cap is over the language's 10 MiB: validate says P008 (as the
    parser does from 10 MiB up) and run's hint is to split the file, never to raise the guard
    only to be refused by the parser next. A sparse file: refused from its size, never read."""
    ws, store, _ = setup
    big = ws / "huge.bot"
    with open(big, "wb") as f:
        f.truncate(17 * 1024 * 1024)
    out = _validate(ws, big)
    assert "P008" in out and "10 MiB" in out and "ITERION_MAX_SOURCE_BYTES" not in out and "L001" not in out
    p = cli("run", str(big), "--store-dir", str(store), cwd=ws)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "huge.bot" in p.stderr and "10 MiB" in p.stderr and "split it" in p.stderr
    # A user's own, lower setting is theirs to raise: its refusal keeps naming the variable.
    own = _validate(ws, big, env={"ITERION_MAX_SOURCE_BYTES": "1000"})
    assert "L001" in own and "ITERION_MAX_SOURCE_BYTES" in own


def test_resume_file_that_is_a_fifo_is_refused(setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    fifo = ws / "pipe.bot"
    os.mkfifo(fifo)
    line = refused_unchanged(store, ["resume", "--run-id", rid, "--file", str(fifo), "--answer", "approved=true",
                                     "--answer", "note=n"], ws)
    assert "FIFO" in line


# -- imports and includes ----------------------------------------------------------------------
def _validate(ws: Path, path: Path, env: dict[str, str] | None = None) -> str:
    t0 = time.monotonic()
    p = cli("validate", str(path), cwd=ws, env=env)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert time.monotonic() - t0 < TIMEOUT
    return p.stdout


def test_import_of_dev_zero_is_refused_without_reading_it(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    bot = write_bot(ws, 'import "/dev/zero"\n' + GATE, name="imp")
    out = _validate(ws, bot)
    assert "L005" in out and "/dev/zero" in out and "absolute" in out
    before = store_fingerprint(store)
    p = cli("run", str(bot), "--store-dir", str(store), cwd=ws)
    assert refused(p, 2).startswith("error:") and "L005" in p.stdout
    assert store_fingerprint(store) == before


def test_import_of_a_fifo_or_device_inside_the_project_is_refused(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    os.mkfifo(ws / "lib.bot")
    (ws / "zero.bot").symlink_to("/dev/zero")
    bot = write_bot(ws, 'import "lib.bot"\n' + GATE, name="imp")
    out = _validate(ws, bot)
    assert "L001" in out and "FIFO" in out
    bot2 = write_bot(ws, 'import "zero.bot"\n' + GATE, name="imp2")
    out2 = _validate(ws, bot2)
    assert "L005" in out2 and "outside the project" in out2  # the link lands in /dev


def test_import_escaping_the_repository_is_l005(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    (ws.parent / "outside.bot").write_text('schema s:\n  a: string\n')  # ws/sub/../../outside.bot
    bot = write_bot(ws / "sub", 'import "../../outside.bot"\n' + GATE, name="esc")
    out = _validate(ws, bot)
    assert "L005" in out and "outside the project" in out and str(ws) in out


def test_import_to_a_sibling_directory_inside_the_repository_is_allowed(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    write_bot(ws / "lib", "schema extra:\n  a: string\n", name="common")
    bot = write_bot(ws / "flows", 'import "../lib/common.bot"\n' + GATE, name="ok")
    p = cli("validate", str(bot), cwd=ws)
    assert p.returncode == 0, p.stdout


def test_include_of_etc_passwd_is_l003(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    bot = write_bot(ws / "a" / "b", 'prompt p:\n  {{include "../../../../../../../../etc/passwd"}}\n' + GATE,
                    name="inc")
    out = _validate(ws, bot)
    assert "L003" in out and "outside the project" in out and "root:" not in out


def test_include_through_a_symlink_leaving_the_project_is_l003(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    (tmp_path / "secret.md").write_text("secret text\n")
    (ws / "link.md").symlink_to(tmp_path / "secret.md")
    bot = write_bot(ws, 'prompt p:\n  {{include "link.md"}}\n' + GATE, name="inc")
    out = _validate(ws, bot)
    assert "L003" in out and "outside the project" in out and "secret text" not in out


def test_outside_a_repository_the_root_is_the_main_files_directory(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "flow").mkdir(parents=True)
    (plain / "shared.md").write_text("shared\n")
    (plain / "flow" / "here.md").write_text("here\n")
    bot = write_bot(plain / "flow", 'prompt p:\n  {{include "here.md"}}\n  {{include "../shared.md"}}\n' + GATE,
                    name="inc")
    out = _validate(plain, bot)
    assert "L003" in out and "shared.md" in out and "here.md" not in out


def test_include_of_a_fifo_and_an_oversized_include(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    os.mkfifo(ws / "pipe.md")
    bot = write_bot(ws, 'prompt p:\n  {{include "pipe.md"}}\n' + GATE, name="inc")
    out = _validate(ws, bot)
    assert "L003" in out and "FIFO" in out
    (ws / "big.md").write_text("y" * 5000)
    bot2 = write_bot(ws, 'prompt p:\n  {{include "big.md"}}\n' + GATE, name="inc2")
    out2 = _validate(ws, bot2, env={"ITERION_MAX_SOURCE_BYTES": "3000"})
    assert "L003" in out2 and "5000 bytes" in out2 and "3000 bytes limit" in out2


def test_bundle_prompt_that_is_a_fifo_and_a_botz_that_is_a_fifo(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    bundle = ws / "bundle"
    (bundle / "prompts").mkdir(parents=True)
    (bundle / "main.bot").write_text(GATE)
    os.mkfifo(bundle / "prompts" / "task.md")
    out = _validate(ws, bundle)
    assert "L001" in out and "task.md" in out and "FIFO" in out
    os.mkfifo(ws / "x.botz")
    line = refused_unchanged(store, ["run", str(ws / "x.botz")], ws)
    assert "x.botz" in line and "FIFO" in line


def test_include_inside_a_bundle_stays_in_the_bundle(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    bundle = ws / "bundle"
    (bundle / "prompts").mkdir(parents=True)
    (ws / "repo-level.md").write_text("in the repository, not in the bundle\n")
    (bundle / "main.bot").write_text(GATE)
    (bundle / "prompts" / "task.md").write_text('{{include "../../repo-level.md"}}\n')
    out = _validate(ws, bundle)
    assert "L003" in out and "outside the project" in out


# -- answers files -----------------------------------------------------------------------------
def test_answers_file_directory_fifo_device_not_utf8(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    (tmp_path / "answers-dir").mkdir()
    os.mkfifo(tmp_path / "answers.fifo")
    (tmp_path / "latin1.json").write_bytes(b'{"note": "caf\xe9"}')
    cases = {
        str(tmp_path / "answers-dir"): "is a directory",
        str(tmp_path / "answers.fifo"): "FIFO",
        "/dev/zero": "character device",
        str(tmp_path / "latin1.json"): "not UTF-8",
    }
    for path, why in cases.items():
        line = refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file", path], ws)
        assert path in line and why in line, line
        line = refused_unchanged(store, ["run", str(ws / "gated.bot"), "--answers-file", path], ws)
        assert path in line and why in line, line


def test_answers_file_is_json_unless_named_yaml(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    yaml_in_json = tmp_path / "answers.json"
    yaml_in_json.write_text("approved: true\nnote: yes\n")
    line = refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file", str(yaml_in_json)], ws)
    assert "not valid JSON" in line
    named_yaml = tmp_path / "answers.yaml"
    named_yaml.write_text("approved: true\nnote: from yaml\n")
    p = cli("resume", "--run-id", rid, "--answers-file", str(named_yaml), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outputs"]["gate"] == {"approved": True, "note": "from yaml"}


def test_billion_laughs_yaml_is_refused_quickly(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = tmp_path / "answers.yaml"
    bomb.write_text("\n".join(lines) + "\nnote: *a9\napproved: true\n")
    line = refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file", str(bomb)], ws)
    assert "YAML aliases" in line and str(bomb) in line


def test_deep_and_non_finite_answers_files(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    deep = tmp_path / "deep.json"
    deep.write_text('{"approved": true, "note": ' + "[" * 5000 + "]" * 5000 + "}")
    assert "nests deeper than 100" in refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file",
                                                               str(deep)], ws)
    deep_yaml = tmp_path / "deep.yml"
    deep_yaml.write_text("note: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nests deeper than 100" in refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file",
                                                               str(deep_yaml)], ws)
    for text in ('{"approved": true, "note": NaN}', '{"approved": true, "note": 1e999}'):
        nan = tmp_path / "nan.json"
        nan.write_text(text)
        line = refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file", str(nan)], ws)
        assert "not valid JSON" in line and ("NaN" in line or "1e999" in line)


def test_oversized_answers_file(tmp_path: Path, setup: tuple[Path, Path, str]) -> None:
    ws, store, rid = setup
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"approved": True, "note": "z" * 3000}))
    line = refused_unchanged(store, ["resume", "--run-id", rid, "--answers-file", str(big)], ws,
                             env={"ITERION_MAX_ANSWERS_BYTES": "1000"})
    assert str(big) in line and "3030 bytes" in line and "1000 bytes limit" in line
    assert "ITERION_MAX_ANSWERS_BYTES" in line


# -- --var and --max-* ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "NaN"])
def test_non_finite_float_var_and_cost_cap_are_refused(value: str, setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    line = refused_unchanged(store, ["run", str(ws / "gated.bot"), "--var", f"ratio={value}"], ws)
    assert "ratio" in line and "not a finite number" in line
    line = refused_unchanged(store, ["run", str(ws / "gated.bot"), f"--max-cost-usd={value}"], ws)
    assert "--max-cost-usd" in line and "not a finite number" in line


def test_json_var_depth_and_non_finite_numbers(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    line = refused_unchanged(store, ["run", str(ws / "gated.bot"), "--var", "blob=" + "[" * 10000 + "]" * 10000], ws)
    assert "blob" in line and "nests deeper than 100" in line and len(line) < 400
    for bad in ("NaN", '{"x": Infinity}', "[1e999]"):
        line = refused_unchanged(store, ["run", str(ws / "gated.bot"), "--var", f"blob={bad}"], ws)
        assert "blob" in line and "not valid JSON" in line


def test_deep_answer_flag_is_refused(setup: tuple[Path, Path, str]) -> None:
    ws, store, _ = setup
    bot = write_bot(ws, GATE.replace("  note: string", "  note: json"), name="gated_json")
    p = cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    rid2 = json.loads(p.stdout)["run_id"]
    before = store_fingerprint(store)
    p = cli("resume", "--run-id", rid2, "--answer", "approved=true",
            "--answer", "note=" + "{\"a\":" * 1000 + "1" + "}" * 1000, "--store-dir", str(store), cwd=ws)
    assert "nests deeper than 100" in refused(p)
    # answers are typed against the paused node's schema once resume holds the run's lock, whose
    # file then names the last owner; everything else is untouched (checking before locking is
    # the "check first, then change" work of point 8)
    after = store_fingerprint(store)
    assert {k: v for k, v in after.items() if not k.endswith("/lock")} == \
        {k: v for k, v in before.items() if not k.endswith("/lock")}


# -- rewind --file, bundle manifests ---------------------------------------------------------------
def test_rewind_file_that_is_a_fifo_or_device_is_refused(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    bot = write_bot(ws, GATE.replace("entry: gate", "entry: first").replace(
        "workflow gated:", 'tool first:\n  command: "echo one > one.txt"\n\nworkflow gated:').replace(
        "  gate -> after when approved", "  first -> gate\n  gate -> after when approved"), name="two")
    p = cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    rid = json.loads(p.stdout)["run_id"]
    os.mkfifo(ws / "pipe.bot")
    workspace_before = store_fingerprint(ws)
    for path, why in ((str(ws / "pipe.bot"), "FIFO"), ("/dev/zero", "character device")):
        line = refused_unchanged(store, ["rewind", "--run-id", rid, "--node", "first", "--file", path], ws)
        assert path in line and why in line
    assert store_fingerprint(ws) == workspace_before


def test_billion_laughs_manifest_is_a_bundle_diagnostic(setup: tuple[Path, Path, str]) -> None:
    ws, _, _ = setup
    bundle = ws / "bundle"
    bundle.mkdir()
    (bundle / "main.bot").write_text(GATE)
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (bundle / "manifest.yaml").write_text("\n".join(lines) + "\nname: *a9\n")
    out = _validate(ws, bundle)
    assert "L004" in out and "YAML aliases" in out
