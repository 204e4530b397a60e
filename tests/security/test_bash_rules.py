"""bash permission rules judge what the command really runs (issue 26, deliverable 3).

The table: hostile spellings of ``rm`` (and of writes outside the workspace) with the decision
under a deny-list policy (``bash(rm *)`` denied, mode allow) and under an allow-list policy
(``bash(git *)`` allowed, mode ask; the same with mode deny turns each ask into a deny). Decisions
are made against a real workspace directory, so redirection targets are resolved for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.permissions import Policy, bash_parts, flags_layer, parse_rule
from iterion.shellcommands import analyze, describe

DENY_RM = Policy([flags_layer("launch", None, deny=["bash(rm *)"])])
ALLOW_GIT = Policy([flags_layer("launch", "ask", allow=["bash(git *)"])])
ALLOW_GIT_STRICT = Policy([flags_layer("launch", "deny", allow=["bash(git *)"])])

# (command, decision under bash(rm *) deny, decision under bash(git *) allow + mode ask)
TABLE: list[tuple[str, str, str]] = [
    ("rm -rf build", "deny", "ask"),
    # program paths and quoting
    ("/bin/rm x", "deny", "ask"),
    ("./rm x", "deny", "ask"),
    ("\\rm x", "deny", "ask"),
    ("'rm' x", "deny", "ask"),
    ('r""m x', "deny", "ask"),
    ("$'rm' x", "deny", "ask"),
    ("r\\\nm x", "deny", "ask"),
    ("rm\tx", "deny", "ask"),
    ("  rm   x  ", "deny", "ask"),
    ("git log\n\\rm x", "deny", "ask"),      # the grammar glues "\\rm" to the line above
    ("git log\n\\\nrm x", "deny", "ask"),   # a continuation on a line of its own, likewise
    ("git log \\\n  --all", "allow", "allow"),
    # lists, pipelines, grouping
    ("git status && rm x", "deny", "ask"),
    ("git status || rm x", "deny", "ask"),
    ("git status; rm x", "deny", "ask"),
    ("git status\nrm x", "deny", "ask"),
    ("git status & rm x", "deny", "ask"),
    ("rm x &", "deny", "ask"),
    ("! rm x", "deny", "ask"),
    ("(rm x)", "deny", "ask"),
    ("{ rm x; }", "deny", "ask"),
    ("if true; then rm x; fi", "deny", "ask"),
    ("for f in a; do rm $f; done", "deny", "ask"),
    ("case a in a) rm x;; esac", "deny", "ask"),
    ("[[ -f x ]] && rm x", "deny", "ask"),
    ("f() { rm x; }; f", "deny", "ask"),
    # substitutions
    ("echo $(rm x)", "deny", "ask"),
    ("echo `rm x`", "deny", "ask"),
    ('echo "$(rm x)"', "deny", "ask"),
    ("echo `echo \\`rm x\\``", "deny", "ask"),       # nested backticks: bash unescapes, then reads again
    ("cat <<-EOF\n\t$(rm x)\n\tEOF", "deny", "ask"),  # a here-doc body runs its substitutions
    ("cat <<EOF\n$(rm x)\nEOF", "deny", "ask"),
    ("coproc NAME { rm x; }", "deny", "ask"),
    ("git log $(rm -rf ~)", "deny", "ask"),
    ("git diff <(rm -rf ~)", "deny", "ask"),
    ("git log >(sh)", "deny", "ask"),
    ("echo ${X:-$(rm x)}", "deny", "ask"),
    # wrappers
    ("command rm x", "deny", "ask"),
    ("builtin command rm x", "deny", "ask"),
    ("exec rm x", "deny", "ask"),
    ("env rm x", "deny", "ask"),
    ("env -i FOO=1 rm x", "deny", "ask"),
    ("nice rm x", "deny", "ask"),
    ("nice -n 5 rm x", "deny", "ask"),
    ("nice -10 rm x", "deny", "ask"),
    ("nohup rm x", "deny", "ask"),
    ("rm${IFS}x", "deny", "ask"),
    ("echo hi | tee >(rm y)", "deny", "ask"),
    ("find . -exec sh -c 'rm \"$1\"' _ {} \\;", "deny", "ask"),
    ("time rm x", "deny", "ask"),
    ("timeout 5 rm x", "deny", "ask"),
    ("timeout -s KILL 5 rm x", "deny", "ask"),
    ("sudo rm x", "deny", "ask"),
    ("sudo -u root rm x", "deny", "ask"),
    ("coproc rm x", "deny", "ask"),
    ("busybox rm x", "deny", "ask"),
    ("git status | xargs rm", "deny", "ask"),
    ("git status | xargs -0 rm -f", "deny", "ask"),
    ("find . -delete", "deny", "ask"),
    ("find . -name '*.o' -delete", "deny", "ask"),
    ("find . -exec rm {} \\;", "deny", "ask"),
    ("find . -execdir rm -f {} +", "deny", "ask"),
    ("git ls-files | xargs -I{} sh -c 'rm {}'", "deny", "ask"),
    # shells and code the parser cannot see into
    ('bash -c "rm x"', "deny", "ask"),
    ("sh -c 'rm x'", "deny", "ask"),
    ("bash -c \"$'\\x72m' x\"", "deny", "ask"),
    ("sh -ec 'git status; rm x'", "deny", "ask"),
    ("bash -c \"$CMD\"", "deny", "ask"),
    ("busybox sh -c 'rm x'", "deny", "ask"),
    ('eval "rm x"', "deny", "ask"),
    ('eval "git status"', "deny", "ask"),
    (". ./script", "deny", "ask"),
    ("source ./script", "deny", "ask"),
    ("bash <<EOF\nrm x\nEOF", "deny", "ask"),
    ("bash <<< 'rm x'", "deny", "ask"),
    ("git status | sh", "deny", "ask"),
    ("$RM x", "deny", "ask"),
    ("${RM} x", "deny", "ask"),
    ("$(echo rm) x", "deny", "ask"),
    ("r* x", "deny", "ask"),
    ("alias ls=rm; ls x", "deny", "ask"),
    ("PATH=.:$PATH git status", "deny", "ask"),
    ("x='a[$(rm x)]'; (( x ))", "deny", "ask"),
    ("echo 'unterminated", "deny", "ask"),
    ("cat <>/etc/x", "deny", "ask"),
    # redirections: writes outside the workspace (or into .git/) are refused under both policies
    ("git log > ~/.bashrc", "deny", "deny"),
    ("git log >> /etc/passwd", "deny", "deny"),
    ("git log >| ../outside.txt", "deny", "deny"),
    ("git log &> /tmp/outside.txt", "deny", "deny"),
    ("git log 2> ../err.txt", "deny", "deny"),
    ("cd .. && git log > x.txt", "deny", "deny"),
    ("git log > .git/hooks/post-commit", "deny", "deny"),
    ("{ git log; } > ../out.txt", "deny", "deny"),
    ("git log >&/etc/x", "deny", "deny"),
    ("exec 3>/etc/x; git log", "deny", "deny"),
    ("time -o /etc/x git log", "deny", "deny"),
    ("git log > \"$OUT\"", "deny", "ask"),
    # harmless: quoted text is data, echo rm is not rm, writes inside the workspace are fine
    ("git log --format='$(rm)'", "allow", "allow"),
    ('git commit -m "rm -rf /"', "allow", "allow"),
    ("git commit -m 'x; rm -rf ~'", "allow", "allow"),
    ("echo rm", "allow", "ask"),
    ("git status", "allow", "allow"),
    ("git log && git diff", "allow", "allow"),
    ("/usr/bin/git status", "allow", "allow"),
    ("./git status", "allow", "ask"),
    ("git log > out.txt 2>&1", "allow", "allow"),
    ("git log 2>/dev/null", "allow", "allow"),
    ("git commit -F - <<'EOF'\nfix: $(quoted) `too`\nEOF", "allow", "allow"),
    ("git commit -F - <<EOF\nfix: $HOME\nEOF", "allow", "allow"),
    ("cd sub && git log > x.txt", "allow", "allow"),
    ("sh -c 'git status'", "allow", "ask"),
    ("git log | grep rm", "allow", "ask"),
    ("command -v rm", "allow", "ask"),
]


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "sub").mkdir()
    return root


def test_the_table_is_large_enough() -> None:
    assert len(TABLE) >= 40 and len({c for c, _, _ in TABLE}) == len(TABLE)


@pytest.mark.parametrize(("command", "under_deny", "under_allow"), TABLE, ids=[repr(c)[:40] for c, _, _ in TABLE])
def test_bash_spellings(ws: Path, command: str, under_deny: str, under_allow: str) -> None:
    args = {"command": command}
    assert DENY_RM.decide("bash", args, workspace=ws).verdict == under_deny, describe(analyze(command, str(ws)))
    assert ALLOW_GIT.decide("bash", args, workspace=ws).verdict == under_allow, describe(analyze(command, str(ws)))
    strict = "allow" if under_allow == "allow" else "deny"
    assert ALLOW_GIT_STRICT.decide("bash", args, workspace=ws).verdict == strict


def test_a_denial_names_the_part_that_decided(ws: Path) -> None:
    d = DENY_RM.decide("bash", {"command": "eval \"$X\""}, workspace=ws)
    assert (d.verdict, d.rule) == ("deny", "bash(rm *)") and "eval runs a computed command" in (d.reason or "")
    d = ALLOW_GIT.decide("bash", {"command": "git log > ~/.bashrc"}, workspace=ws)
    assert d.verdict == "deny" and d.rule is None and "outside the workspace" in (d.reason or "")
    assert d.payload()["reason"] == d.reason
    d = ALLOW_GIT.decide("bash", {"command": "git status"}, workspace=ws)
    assert d.payload() == {"decision": "allow", "rule": "bash(git *)", "source": "launch"}


def test_a_rule_can_allow_a_write_outside_and_an_all_star_allow_covers_opaque_commands(ws: Path) -> None:
    p = Policy([flags_layer("launch", "ask", allow=["bash(git *)", "bash(> /tmp/*)"])])
    assert p.decide("bash", {"command": "git log > /tmp/log.txt"}, workspace=ws).verdict == "allow"
    assert p.decide("bash", {"command": "git log > /etc/log.txt"}, workspace=ws).verdict == "deny"
    everything = Policy([flags_layer("launch", "ask", allow=["bash(*)"])])
    assert everything.decide("bash", {"command": "eval \"$X\"; git log > /etc/x"}, workspace=ws).verdict == "allow"
    # nothing configured at all: bash is unconstrained, as before (the sandbox is the box then)
    assert Policy().decide("bash", {"command": "git log > /etc/x; eval x"}, workspace=ws).verdict == "allow"
    # a policy that says nothing about bash does not refuse its writes either
    files_only = Policy([flags_layer("launch", None, deny=["read_file(secrets/**)"])])
    assert files_only.decide("bash", {"command": "echo > /tmp/x"}, workspace=ws).verdict == "allow"


def test_a_symlink_in_the_workspace_pointing_outside_is_a_write_outside(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    assert ALLOW_GIT.decide("bash", {"command": "git log > link/x.txt"}, workspace=ws).verdict == "allow"
    (ws / "link").symlink_to(tmp_path / "elsewhere")  # made by an earlier call: judged anew, not from a cache
    d = ALLOW_GIT.decide("bash", {"command": "git log > link/x.txt"}, workspace=ws)
    assert d.verdict == "deny" and str(tmp_path / "elsewhere" / "x.txt") in (d.reason or "")


def test_a_later_layer_still_wins_part_by_part() -> None:
    p = Policy([flags_layer("workflow", None, deny=["bash(rm *)"]),
                flags_layer("launch", "ask", allow=["bash(git *)", "bash(rm build/*)"])])
    assert p.decide("bash", {"command": "git clean -n && rm build/x"}).verdict == "allow"
    assert p.decide("bash", {"command": "git status && rm src/x"}).verdict == "deny"
    assert p.decide("bash", {"command": "git status && ls"}).verdict == "ask"


def test_a_deny_pattern_spanning_commands_still_matches_the_whole_text() -> None:
    assert parse_rule("bash(curl * | *)", "deny").matches("bash", {"command": "curl -s x | python3"})


def test_what_the_parser_sees() -> None:
    seen = describe(analyze("sudo -u me find . -exec r\\m -f {} + ; xargs -I{} {} x", "/ws", "/home/me"))
    assert seen["invocations"] == ["sudo -u me find . -exec rm -f {} +", "find . -exec rm -f {} +", "rm -f {}",
                                   "xargs -I{} {} x"]
    assert seen["opaque"] == ["the program name '{}' is computed at run time"]
    assert [p.kind for p in bash_parts("git log > out", None)] == ["whole", "command"]  # no workspace: no write judged


# rows safe to run for real: nothing redirected, nothing outside the scratch directory named
RUNNABLE = [c for c, _, _ in TABLE if ">" not in c and "/etc" not in c and "cd .." not in c]


def test_whenever_real_bash_runs_rm_the_deny_rule_caught_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table against bash itself: each runnable row runs in a scratch directory with an
    ``rm`` on PATH (and ``./rm``) that leaves a marker; a row that made bash run rm (or delete
    the scratch file) must be one ``bash(rm *)`` denies."""
    import shutil
    import subprocess

    assert shutil.which("bash"), "bash is needed for this test (apt-get install bash)"
    assert len(RUNNABLE) >= 60
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    marker = tmp_path / "rm-ran"
    shim = f"#!/bin/sh\ntouch {marker}\n"
    (shim_dir / "rm").write_text(shim)
    (shim_dir / "rm").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    ran_rm = []
    for i, command in enumerate(RUNNABLE):
        scratch = tmp_path / f"s{i}"
        scratch.mkdir()
        for name in ("x", "keep.txt", "list"):
            (scratch / name).write_text("x\n")
        (scratch / "rm").write_text(shim)
        (scratch / "rm").chmod(0o755)
        marker.unlink(missing_ok=True)
        env = {"PATH": f"{shim_dir}:/usr/bin:/bin", "HOME": str(home), "LC_ALL": "C"}
        subprocess.run(["bash", "-c", command], cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20, check=False)
        if marker.exists() or not (scratch / "x").exists():
            ran_rm.append(command)
            decided = DENY_RM.decide("bash", {"command": command}, workspace=scratch).verdict
            assert decided == "deny", f"bash ran rm for {command!r} but bash(rm *) decided {decided}"
    assert len(ran_rm) >= 30  # the table really exercises rm, it is not refused for show


SPELLINGS = ["rm", "'rm'", "\\rm", "r''m", "$'\\x72m'", "/bin/rm", "./rm", "rm$@", "$(echo rm)", "r?"]
WRAPPERS = ["", "command ", "env FOO=1 ", "timeout 5 ", "xargs -a list "]
CONTEXTS = ["{}", "({})", "echo $({})", "echo `{}`", "true | {}", "cat <({})", "sh -c '{}'", "bash -c \"{}\"",
            "f() {{ {}; }}; f", "echo ${{Z:-$({})}}", "find . -maxdepth 0 -exec {} \\;", "bash <<< '{}'"]


def test_generated_spellings_that_bash_runs_as_rm_are_denied(tmp_path: Path) -> None:
    """Every wrapper x spelling x context, run by bash with a marker-leaving rm: whenever bash ran
    rm, ``bash(rm *)`` denied the command."""
    import itertools
    import subprocess

    shim = f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "rm").write_text(shim)
    (tmp_path / "bin" / "rm").chmod(0o755)
    ran = 0
    for n, (w, r, c) in enumerate(itertools.product(WRAPPERS, SPELLINGS, CONTEXTS)):
        inner = f"{w}{r} x"
        if ("'" in c and "'" in inner) or ('"' in c and '"' in inner):
            continue
        command = c.format(inner)
        d = tmp_path / f"d{n}"
        d.mkdir()
        for name in ("x", "list"):
            (d / name).write_text("x\n")
        (d / "rm").write_text(shim)
        (d / "rm").chmod(0o755)
        (tmp_path / "ran").unlink(missing_ok=True)
        subprocess.run(["bash", "-c", command], cwd=d, env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(d)},
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)
        if (tmp_path / "ran").exists() or not (d / "x").exists():
            ran += 1
            decided = DENY_RM.decide("bash", {"command": command}, workspace=d).verdict
            assert decided == "deny", f"bash ran rm for {command!r} but bash(rm *) decided {decided}"
    assert ran >= 500  # most combinations do run rm: the check is not vacuous
