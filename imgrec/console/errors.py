"""The errors a command reports in one line, no traceback, and the exit status each one gives.

``UserError`` (status 2): the user can fix it, a bad flag, path or setting. ``DataError`` (status 1):
the data or the run went wrong, a damaged dataset or a NaN loss. ``Interrupted`` (status 130): Ctrl-C;
``Terminated`` (status 143): SIGTERM.
``BuildFailed`` is the DataError a build raises on purpose; Beam's runners wrap it, so
``build_failure_message`` finds it again.
"""
import re

_MARKER = 'BuildFailed'
_FOUND = re.compile(_MARKER + r': (?P<message>[^\n]*?)(?: \[while running [^\n]*)?$', re.MULTILINE)


class CommandError(Exception):
    """An error a command reports as ``<prog>: <word>: <message>`` and exits with ``exit_status``."""
    exit_status = 1
    word = 'error'


class UserError(CommandError):
    """A bad path, flag or setting; the command exits with status 2, as for a usage error."""
    exit_status = 2


class DataError(CommandError):
    """A damaged dataset or a run that went wrong (a NaN loss); the command exits with status 1."""
    exit_status = 1


class Interrupted(CommandError):
    """The user stopped the command (Ctrl-C); the message says what was left behind. Exit status 130, as a
    shell gives a command ended by SIGINT."""
    exit_status = 130
    word = 'interrupted'


class Terminated(Interrupted):
    """SIGTERM stopped the command (a scheduler, ``kill``, a container stopping); the message says what was
    left behind, as Ctrl-C's does. Exit status 143, as a shell gives a command ended by SIGTERM."""
    exit_status = 143
    word = 'terminated'


class Incomplete(DataError):
    """A build that published its version (readers can see it) but failed in a later step: never called
    'failed'. The message says what readers see and what a rerun of the same command finishes. Status 1."""
    word = 'incomplete'


class BuildFailed(DataError):
    """The build cannot produce a correct dataset; the message says why, in one line."""
    word = 'failed'


def build_failure_message(error):
    """The one-line message of a BuildFailed raised inside a pipeline, wherever the runner wrapped it.

    Returns None when ``error`` did not come from a BuildFailed.
    """
    # A runner may re-raise the BuildFailed itself, with the failing step appended to its message.
    text = f'{_MARKER}: {error}' if isinstance(error, BuildFailed) else str(error)
    match = _FOUND.search(text)
    return match['message'] if match else None
