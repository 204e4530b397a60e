"""What a careless or hostile user types, and the one clear line (exit 2) each gets.

Each case was found by trying it at the CLI: a message that misled (a symlink loop "does not
exist", a store inside a plain directory told to edit .git/info/exclude), an internal error (a
workspace whose name is not UTF-8), a garbage environment value silently ignored, a conflicting
repeated flag silently resolved. Most are checked in-process (the function that owns the rule);
the CLI paths that only a process shows (exit codes, what is left in the store) run one.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from gitrefs.persist import UserError
from tests.conftest import kill_process, make_checkout, run_cli, start_cli, write_bot
from tests.natsserver import NatsServer

TOOL = """
tool make:
  command: "echo made > made.txt"

workflow w:
  entry: make
  make -> done
"""

GATE = """
schema ok:
  ok: bool

human gate:
  instructions: "ok?"
  output: ok

workflow g:
  entry: gate
  gate -> done
"""


# -- where the store and the workspace are ------------------------------------------------------
def test_a_workspace_that_is_the_store_or_inside_it_is_refused_before_any_run(tmp_path: Path) -> None:
    from iterion.store.placement import StorePlacementError, check_store_placement
    from iterion.store.layout import PROJECT

    store = tmp_path / "store"
    (store / "runs").mkdir(parents=True)
    for ws, words in ((store, "is the run store itself"), (store / "runs", "is inside the run store")):
        with pytest.raises(StorePlacementError) as refused:
            check_store_placement(store, PROJECT, ws)
        assert words in refused.value.message and "--workspace" in (refused.value.hint or "")


def test_a_store_inside_a_plain_directory_is_not_told_about_git(tmp_path: Path) -> None:
    from iterion.store.layout import EXPLICIT
    from iterion.store.placement import StorePlacementError, check_store_placement

    ws = tmp_path / "plain"
    (ws / "st").mkdir(parents=True)
    with pytest.raises(StorePlacementError) as refused:
        check_store_placement(ws / "st", EXPLICIT, ws)
    text = refused.value.message
    assert "git clean" not in text and ".git/info/exclude" not in text
    assert str(ws / ".iterionignore") in text and "'/st/'" in text
    (ws / ".iterionignore").write_text("/st/\n")  # the fix it names is one that works
    check_store_placement(ws / "st", EXPLICIT, ws)


def test_run_with_the_workspace_inside_the_store_leaves_no_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "runs").mkdir(parents=True)
    bot = write_bot(tmp_path / "src", TOOL)
    p = run_cli("run", str(bot), "--workspace", str(store / "runs"), "--store-dir", str(store), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("error: the workspace ") and "inside the run store" in p.stderr, p.stderr
    assert list((store / "runs").iterdir()) == []  # before: a `failed` run was created


def test_a_workspace_whose_name_is_not_utf8_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    bot = write_bot(tmp_path / "src", TOOL)
    store = tmp_path / "store"
    ws = Path(os.fsdecode(bytes(tmp_path) + b"/ws\xff"))
    make_checkout(ws)
    p = run_cli("run", str(bot), "--workspace", str(ws), "--store-dir", str(store), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "internal error" not in p.stderr and "not UTF-8" in p.stderr, p.stderr
    assert "ws\\udcff" in p.stderr  # named, escaped on one line
    assert not (store / "runs").exists() or list((store / "runs").iterdir()) == []


def test_require_utf8_path() -> None:
    from gitrefs.persist.text import require_utf8_path

    require_utf8_path("/tmp/caf\u00e9 et \u65e5\u672c", "workspace")  # any UTF-8 name is fine
    with pytest.raises(UserError, match=r"workspace /tmp/x\\udcff has a name that is not UTF-8"):
        require_utf8_path(os.fsdecode(b"/tmp/x\xff"), "workspace")


# -- workflow files that are links ----------------------------------------------------------------
def test_a_symlink_loop_or_a_dangling_link_is_named_as_such(tmp_path: Path) -> None:
    from iterion.engine.errors import EngineError
    from iterion.engine.source import compile_source
    from gitrefs.persist.inputs import InputFileError

    (tmp_path / "a.bot").symlink_to("b.bot")
    (tmp_path / "b.bot").symlink_to("a.bot")
    with pytest.raises(InputFileError, match="symbolic links"):
        compile_source(tmp_path / "a.bot")
    (tmp_path / "d.bot").symlink_to("gone.bot")
    with pytest.raises(EngineError, match=r"d\.bot is a symlink to gone\.bot, which does not exist"):
        compile_source(tmp_path / "d.bot")
    with pytest.raises(EngineError, match="does not exist"):
        compile_source(tmp_path / "nothing.bot")


# -- environment values -----------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["garbage", "-5", "0", "1e9", "\u0663"])
def test_a_garbage_size_limit_is_refused_not_silently_the_default(monkeypatch: pytest.MonkeyPatch,
                                                                  raw: str) -> None:
    from gitrefs.persist.inputs import SOURCE_LIMIT

    monkeypatch.setenv("ITERION_MAX_SOURCE_BYTES", raw)
    with pytest.raises(UserError, match=r"\$ITERION_MAX_SOURCE_BYTES=.* is not a positive whole number"):
        SOURCE_LIMIT.bytes()
    monkeypatch.setenv("ITERION_MAX_SOURCE_BYTES", " 123 ")
    assert SOURCE_LIMIT.bytes() == 123
    monkeypatch.delenv("ITERION_MAX_SOURCE_BYTES")
    assert SOURCE_LIMIT.bytes() == SOURCE_LIMIT.default


def test_validate_under_a_garbage_limit_says_so_on_one_line(tmp_path: Path) -> None:
    bot = write_bot(tmp_path, TOOL)
    p = run_cli("validate", str(bot), "--json", env={"ITERION_MAX_SOURCE_BYTES": "lots"})
    assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    assert p.stderr.splitlines()[0] == "error: $ITERION_MAX_SOURCE_BYTES='lots' is not a positive whole number of bytes"


@pytest.mark.parametrize("raw", ["abc", "nan", "-1", "0"])
def test_a_garbage_server_handshake_timeout_is_a_refusal_not_an_internal_error(
        monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    from iterion.server.service import _handshake_timeout_s

    monkeypatch.setenv("ITERION_SERVER_HANDSHAKE_S", raw)
    with pytest.raises(UserError, match="ITERION_SERVER_HANDSHAKE_S"):
        _handshake_timeout_s()
    monkeypatch.setenv("ITERION_SERVER_HANDSHAKE_S", "2.5")
    assert _handshake_timeout_s() == 2.5


# -- flags -----------------------------------------------------------------------------------------
def test_a_key_given_twice_with_different_values_is_refused() -> None:
    from cli.errors import CliError
    from cli.flags import key_values

    assert key_values(["a=1", "b=x=y", "a=1"], "--var") == {"a": "1", "b": "x=y"}  # the same twice: fine
    with pytest.raises(CliError, match=r"--answer approved is given twice, as 'true' and 'false'"):
        key_values(["approved=true", "note=x", "approved=false"], "--answer")
    with pytest.raises(CliError, match="is not KEY=VALUE"):
        key_values(["novalue"], "--var")
    with pytest.raises(CliError, match="empty key"):
        key_values(["=v"], "--var")


@pytest.mark.parametrize("ref, words", [("", "the run id is empty"), ("  ", "the run id '  ' is blank")])
def test_an_empty_run_id_says_empty_not_too_short(ref: str, words: str) -> None:
    from iterion.store.errors import StoreError
    from iterion.store.ids import check_run_ref

    with pytest.raises(StoreError) as refused:
        check_run_ref(ref)
    assert refused.value.message == words


# -- printed commands paste as printed ---------------------------------------------------------------
def test_diagram_and_init_print_commands_quoted_and_spelled_as_invoked(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("ITERION_PROG", "./my iterion")  # a wrapper naming itself, verbatim
    monkeypatch.chdir(tmp_path)
    bad = CliRunner().invoke(app, ["diagram", "no such.bot"])  # (in-process: the error is not printed)
    assert isinstance(bad.exception, UserError) and bad.exception.exit_code == 2
    assert bad.exception.hint == "./my iterion validate 'no such.bot' lists every diagnostic"
    made = CliRunner().invoke(app, ["init", "a b"])
    assert made.exit_code == 0, made.output
    assert "next: cd 'a b' && ./my iterion run demo.bot" in made.stdout


# -- the live progress line on a narrow terminal -------------------------------------------------------
def _visible(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


@pytest.mark.parametrize("columns", [20, 30, 80])
def test_live_lines_never_wrap_a_narrow_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from cli.progress import Progress

    monkeypatch.setenv("COLUMNS", str(columns))
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    progress = Progress(live=True)
    for node in ("save_draft", "a_node_with_a_long_name_indeed"):
        progress(SimpleNamespace(type="node_started", node=node, iteration=12, payload={"kind": "compute"}))
    lines = [_visible(ln) for ln in err.getvalue().splitlines() if "▶" in ln]
    assert lines and all(len(ln) < columns for ln in lines), lines  # the last column stays free
    assert any("save_draft" in ln for ln in lines)  # the name is kept before the kind
    if columns >= 80:
        assert all("(compute, iteration 12)" in ln for ln in lines), lines


# -- Ctrl-C on the runner --------------------------------------------------------------------------------
def test_ctrl_c_stops_the_runner_with_130_and_sigterm_with_0(tmp_path: Path, nats_server: NatsServer) -> None:
    """Every command exits 130 on Ctrl-C; the runner still stops gracefully first (and a
    SIGTERM stop, the service manager's, stays a clean 0)."""
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 0)):
        log = tmp_path / f"runner-{sig.name}.log"
        with open(log, "wb") as err:
            proc = start_cli("runner", "--nats", nats_server.url, "--prefix", "h" + uuid.uuid4().hex[:10],
                             "--work-dir", str(tmp_path / "work"), "--grace", "1", cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=err, text=False)
        try:
            deadline = time.monotonic() + 60
            while b"claiming from" not in log.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == code, log.read_text()
        finally:
            kill_process(proc)
        text = log.read_text()
        assert f"{sig.name}: stopping" in text and "stopped after 0 deliveries" in text
        assert "Traceback" not in text


# -- more flags found wanting ---------------------------------------------------------------------------
def test_gc_older_than_past_any_date_collects_nothing_instead_of_crashing(tmp_path: Path) -> None:
    from datetime import timedelta

    from iterion.store import Store
    from iterion.store.gc import collect, parse_duration

    assert parse_duration("99999999999999999999d") == timedelta.max
    store = Store(tmp_path / "store")
    (tmp_path / "store" / "runs").mkdir(parents=True)
    for age in ("1000000d", "99999999999999999999d"):  # before year 1 / past timedelta's range
        assert collect(store, older_than=parse_duration(age), dry_run=True).collected == []


def test_bundle_pack_never_creates_directories_for_a_mistyped_output(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    bundle = tmp_path / "b"
    write_bot(bundle, TOOL, name="main")
    (tmp_path / "afile").write_text("x")
    for out, words in ((tmp_path / "no" / "such" / "x.botz", "does not exist"),
                       (tmp_path / "afile" / "x.botz", "is not a directory"),
                       (tmp_path, "is a directory")):
        result = CliRunner().invoke(app, ["bundle", "pack", str(bundle), "-o", str(out)])
        assert isinstance(result.exception, UserError) and words in result.exception.message, result.output
    assert not (tmp_path / "no").exists()
    ok = CliRunner().invoke(app, ["bundle", "pack", str(bundle), "-o", str(tmp_path / "b.botz")])
    assert ok.exit_code == 0 and (tmp_path / "b.botz").is_file()


@pytest.mark.parametrize("url, words", [("http://[::1", "Invalid port"), ("http://127.0.0.1:99999", "out of range"),
                                        ("http://", "no host"), ("http://127.0.0.1:1/\n", "non-printable")])
def test_remote_refuses_a_malformed_server_url_as_bad_input(url: str, words: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.remote_cmd import Client

    monkeypatch.setenv("ITERION_SERVER_TOKEN", "a-token-long-enough")
    with pytest.raises(UserError) as refused:
        Client(url, None)
    assert words in refused.value.message and "\n" not in refused.value.message


def test_inspect_refuses_an_event_type_that_no_event_has(tmp_path: Path) -> None:
    from cli.errors import CliError
    from cli.inspect_cmd import _check_types

    _check_types(["node_failed", "run_started"], [])  # the vocabulary
    _check_types(["custom_thing"], [SimpleNamespace(type="custom_thing")])  # or what the run has
    with pytest.raises(CliError, match="--type node_fail is not an event type") as refused:
        _check_types(["node_fail"], [])
    assert "node_failed" in (refused.value.hint or "")


def test_inspect_refuses_a_node_the_run_does_not_have(tmp_path: Path, ws: Path) -> None:
    """``--node reveiw`` (a typo) is refused with the run's nodes, not an empty timeline; a node
    of the workflow that has no event yet passes."""
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", GATE)
    parked = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert parked.returncode == 4, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    typo = run_cli("inspect", "--run-id", run_id, "--node", "gat", "--store-dir", str(store), cwd=ws)
    assert typo.returncode == 2 and "has no node 'gat'" in typo.stderr and "gate" in typo.stderr, typo.stderr
    ok = run_cli("inspect", "--run-id", run_id, "--node", "gate", "--store-dir", str(store), cwd=ws)
    assert ok.returncode == 0 and "gate" in ok.stdout, ok.stderr


def test_a_damaged_interaction_record_is_one_line_naming_the_file(tmp_path: Path) -> None:
    from iterion.store.errors import CorruptDocumentError
    from iterion.store.interactions import InteractionStore

    store = InteractionStore(tmp_path)
    asked = store.ask("approve", {"fields": []})
    path = tmp_path / "interactions" / f"{asked.id}.json"
    path.write_text("{garb")
    for call in (lambda: store.load(asked.id), store.list, lambda: store.answer(asked.id, {"ok": True})):
        with pytest.raises(CorruptDocumentError) as refused:
            call()
        assert str(path) in refused.value.message and "\n" not in refused.value.message


def test_resume_with_a_bad_file_says_what_the_user_gave_and_that_the_run_is_untouched(tmp_path: Path,
                                                                                      ws: Path) -> None:
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", GATE)
    parked = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert parked.returncode == 4, parked.stderr
    run_id = json.loads(parked.stdout)["run_id"]
    (tmp_path / "bin.bot").write_bytes(b"\xff\xfe\x00binary")
    for given, words in ((tmp_path / "nope.bot", "workflow file " + str(tmp_path / "nope.bot") + " does not exist"),
                         (tmp_path / "bin.bot", f"validation error(s); run {run_id} was not resumed")):
        p = run_cli("resume", "--run-id", run_id, "--answer", "ok=true", "--file", str(given),
                    "--store-dir", str(store), cwd=ws)
        assert p.returncode == 2 and words in p.stderr, p.stderr
        assert "recorded for run" not in p.stderr and "no run was created" not in p.stderr
    assert json.loads((store / "runs" / run_id / "run.json").read_text())["status"] == "paused_waiting_human"


def test_track_never_captures_or_restores_a_missing_workspace(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    gone = tmp_path / "typo"
    (tmp_path / "afile").write_text("x")
    for argv in (["capture", "--label", "pre:x:0"], ["restore", "--pivot", "pre:x:0"], ["undo", "--bank", "b1"]):
        for ws, words in ((gone, "does not exist"), (tmp_path / "afile", "is not a directory")):
            result = CliRunner().invoke(app, ["track", *argv, "--store", str(tmp_path / "ts"), "--run-id", "r1",
                                              "--workspace", str(ws)])
            assert isinstance(result.exception, UserError), (argv, result.output)
            assert words in result.exception.message
    assert not gone.exists() and not (tmp_path / "ts").exists()  # was: a "full, 0 hashed" snapshot of nothing


def test_init_refuses_the_filesystem_root_and_an_uncreatable_directory(tmp_path: Path) -> None:
    from cli.scaffold import scaffold

    with pytest.raises(UserError, match="is the filesystem root"):
        scaffold(Path("/"))
    assert not Path("/demo.bot").exists()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match=r"cannot create .*afile/sub: Not a directory"):  # was: internal error
        scaffold(tmp_path / "afile" / "sub")


# -- a reader that goes away ------------------------------------------------------------------------------
def test_reader_gone_sees_a_closed_pipe_before_any_write(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.output import reader_gone

    r, w = os.pipe()
    out = os.fdopen(w, "w")
    try:
        monkeypatch.setattr(sys, "stdout", out)
        assert not reader_gone()
        os.close(r)
        assert reader_gone()
    finally:
        monkeypatch.undo()
        out.close()


SLEEPY = """
tool nap:
  command: "sleep 60"

workflow s:
  entry: nap
  nap -> done
"""


def test_inspect_follow_into_head_stops_when_head_exits_and_the_run_goes_on(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", SLEEPY)
    run = start_cli("run", str(bot), "--store-dir", str(store), cwd=ws, start_new_session=True,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list((store / "runs").glob("*/events.jsonl")):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        run_id = next((store / "runs").iterdir()).name
        follow = start_cli("inspect", "--run-id", run_id, "--follow", "--store-dir", str(store), cwd=ws)
        assert follow.stdout is not None
        assert run_id in follow.stdout.readline()  # what `head -1` reads, then it exits
        follow.stdout.close()
        assert follow.wait(timeout=50) == 0  # before: it followed on until the run ended (60 s)
        assert run.poll() is None  # the run itself goes on
        assert json.loads((store / "runs" / run_id / "run.json").read_text())["status"] == "running"
    finally:
        kill_process(run)


@pytest.mark.parametrize("columns, width", [("abc", None), ("0", None), ("-5", None), (" ", None), ("30", 30)])
def test_a_garbage_columns_does_not_cut_a_pipe(monkeypatch: pytest.MonkeyPatch, columns: str,
                                               width: int | None) -> None:
    from cli.output import output_width

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal
    assert output_width() == width


def test_a_store_subdirectory_replaced_by_a_file_is_one_line_and_leaves_no_run(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", TOOL)
    first = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert first.returncode == 0, first.stderr
    runs_before = sorted(p.name for p in (store / "runs").iterdir())
    for sub, words in (("names", "the store's name index"), ("workspaces", "File exists")):
        kept = store / f"{sub}.kept"
        (store / sub).rename(kept)
        (store / sub).write_text("not a directory")
        p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws)
        assert p.returncode == 2 and "internal error" not in p.stderr, p.stderr
        assert p.stderr.startswith("error: ") and words in p.stderr and str(store / sub) in p.stderr, p.stderr
        assert sorted(p.name for p in (store / "runs").iterdir()) == runs_before  # no empty run directory
        assert not list(store.glob(".names.*.tmp"))
        (store / sub).unlink()
        kept.rename(store / sub)


def test_a_failed_atomic_write_names_the_file_not_its_temp_file(tmp_path: Path) -> None:
    from gitrefs.persist.atomic import atomic_write_bytes
    from gitrefs.persist.oserror import environment_error

    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "out.botz"  # under a file: ENOTDIR at the temp file's open
    with pytest.raises(NotADirectoryError) as failed:
        atomic_write_bytes(target, b"data")
    assert failed.value.filename == str(target)
    env = environment_error(failed.value)
    assert env is not None and env.message.startswith(f"{target}: ") and ".tmp" not in env.message
    (tmp_path / "adir").mkdir()
    with pytest.raises(IsADirectoryError) as replaced:  # the rename over a directory
        atomic_write_bytes(tmp_path / "adir", b"data")
    assert replaced.value.filename == str(tmp_path / "adir")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temp file left
