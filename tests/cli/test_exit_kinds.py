"""The error kinds below the CLI and the one mapping to exit statuses (``cli.exit_codes.EXIT_FOR_KIND``).

Lower layers say what kind of failure a ``UserError`` is; only the CLI chooses an exit status.
The statuses a user sees do not change: a refusal and bad input exit 2 (1 is a failed run),
an internal error 3; a CliError exits with the status its command chose."""

from __future__ import annotations

import pytest

from cli.errors import CliError, report
from cli.exit_codes import EXIT_FOR_KIND, STATUS_EXIT, ExitCode, exit_for_kind
from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorCode, ErrorKind
from iterion.rewind.errors import RewindError
from iterion.sandbox.errors import SandboxError
from iterion.store.errors import RunNotFoundError, StatusRefusedError


def test_every_kind_has_one_exit_status_and_none_is_a_run_outcome() -> None:
    assert set(EXIT_FOR_KIND) == set(ErrorKind)
    assert EXIT_FOR_KIND == {ErrorKind.REFUSED: ExitCode.REFUSED, ErrorKind.BAD_INPUT: ExitCode.REFUSED,
                             ErrorKind.INTERNAL: ExitCode.INTERNAL}
    assert not set(EXIT_FOR_KIND.values()) & set(STATUS_EXIT.values())  # 1, 4, 5, 6, 8 say how a run ended
    assert (int(ExitCode.REFUSED), int(ExitCode.INTERNAL)) == (2, 3)  # what users and scripts see


def test_the_kinds_are_a_wire_format_and_the_old_name_is_the_same_enum() -> None:
    # the HTTP API's `exit_code` field and the server worker's answer carry these values
    assert [(k.name, int(k)) for k in ErrorKind] == [("REFUSED", 1), ("BAD_INPUT", 2), ("INTERNAL", 3)]
    assert ErrorCode is ErrorKind


@pytest.mark.parametrize(("exc", "status"), [
    (UserError("bad value"), ExitCode.REFUSED),
    (UserError("no", kind=ErrorKind.REFUSED), ExitCode.REFUSED),
    (UserError("no", exit_code=ErrorKind.REFUSED), ExitCode.REFUSED),  # the older keyword: still a kind
    (StatusRefusedError("run finished"), ExitCode.REFUSED),
    (RunNotFoundError("no run x"), ExitCode.REFUSED),
    (RewindError("no such node"), ExitCode.REFUSED),
    (SandboxError("no bwrap"), ExitCode.REFUSED),
    (CliError("pending", exit_code=ExitCode.CONTROL_PENDING), ExitCode.CONTROL_PENDING),
    (CliError("refused"), ExitCode.REFUSED),
    (CliError("server bug", exit_code=ExitCode.INTERNAL), ExitCode.INTERNAL),
    (KeyError("a bug"), ExitCode.INTERNAL),
])
def test_report_chooses_the_exit_status(exc: BaseException, status: ExitCode, capsys: pytest.CaptureFixture[str]) -> None:
    assert report(exc) == status
    assert capsys.readouterr().err.startswith(("error: ", "internal error: "))


def test_a_user_error_holds_a_kind_never_an_exit_status() -> None:
    assert RewindError("x").kind is ErrorKind.REFUSED and UserError("x").kind is ErrorKind.BAD_INPUT
    assert StatusRefusedError("x").exit_code == 1  # the wire value of its kind (HTTP 409's body)
    with pytest.raises(ValueError):
        UserError("x", exit_code=ExitCode.CONTROL_PENDING)  # an exit status is not a kind
    with pytest.raises(ValueError):
        CliError("x", exit_code=42)  # a CLI status is a member of ExitCode


@pytest.mark.parametrize(("wire", "status"), [(1, ExitCode.REFUSED), (2, ExitCode.REFUSED), (3, ExitCode.INTERNAL),
                                              (None, ExitCode.REFUSED), (0, ExitCode.REFUSED),
                                              (99, ExitCode.REFUSED)])
def test_a_servers_kind_exits_as_the_local_verb_would(wire: int | None, status: ExitCode) -> None:
    assert exit_for_kind(wire) == status
