"""The one exception a build raises on purpose, and how to find it again in a runner's error."""
import re

_MARKER = 'BuildFailed'
_FOUND = re.compile(_MARKER + r': (?P<message>[^\n]*?)(?: \[while running [^\n]*)?$', re.MULTILINE)


class BuildFailed(Exception):
    """The build cannot produce a correct dataset; the message says why, in one line."""


class TruncatedRead(ValueError):
    """A file or object ends before the byte range a record index or reference names: no retry mends it."""


def checked_range(path, start, end, data):
    """``data``, the bytes read for [start, end) of ``path``; raises TruncatedRead when it is short."""
    if len(data) != end - start:
        raise TruncatedRead(f'{path} ends at {start + len(data)}, before byte {end} of a record')
    return data


def build_failure_message(error):
    """The one-line message of a BuildFailed raised inside a pipeline, wherever the runner wrapped it.

    Returns None when ``error`` did not come from a BuildFailed.
    """
    # A runner may re-raise the BuildFailed itself, with the failing step appended to its message.
    text = f'{_MARKER}: {error}' if isinstance(error, BuildFailed) else str(error)
    match = _FOUND.search(text)
    return match['message'] if match else None
