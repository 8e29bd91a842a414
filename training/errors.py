"""The one exception type that means "the user can fix this": a command prints it as one line."""


class UserError(Exception):
    """A bad path, flag or dataset, reported as a one-line message without a traceback."""
