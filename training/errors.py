"""The exceptions that mean "the user can fix this": a command prints them as one line, no traceback."""


class UserError(Exception):
    """A bad path, flag or setting; the command exits with status 2, as for a usage error."""
    exit_status = 2


class DataError(UserError):
    """A damaged dataset or a run that went wrong (a NaN loss); the command exits with status 1."""
    exit_status = 1
