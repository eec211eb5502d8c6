"""The one error type users see: a single line, no traceback."""


class UserError(Exception):
    """Bad input or a failed step the user can fix; the CLI prints it as one line, exit 2."""

    exit_code = 2


class StepFailed(UserError):
    """An external step (build, push, conversion, job) failed; exit 1."""

    exit_code = 1
