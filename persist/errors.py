"""The one shape of a user-facing failure, shared by every layer.

Bad input or a refusal the user can act on (never a bug): ``message`` is one line, ``hint``
says what would work, ``exit_code`` is what the CLI exits with. The CLI prints any
``UserError`` as ``error:``/``hint:`` lines instead of a traceback, so a layer only has to
derive its errors from it.
"""

from __future__ import annotations


class UserError(Exception):
    default_exit_code = 2  # bad input; a refused operation uses 1 (the CLI exits 2 for both: cli/exit_codes.py)

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = self.default_exit_code if exit_code is None else exit_code
