"""What the build prints on the user's terminal.

Local Beam workers are separate processes that print a failing step's traceback straight to file
descriptor 2. For a user mistake the job reports one line instead, so during a local run fd 2 is held
in a temporary file, and handed back unless the run ended in a reported mistake or failure.
"""
import contextlib
import os
import re
import sys
import tempfile
import traceback


class Held:
    """What a run wrote to fd 2, kept aside: ``replay()`` hands it back, ``read()`` returns it."""

    def __init__(self, stream, saved):
        self._stream = stream
        self._saved = saved

    def read(self):
        sys.stderr.flush()
        self._stream.seek(0)
        return self._stream.read()

    def replay(self):
        os.write(self._saved, self.read())


class NotHeld:
    def read(self):
        return b''

    def replay(self):
        pass


@contextlib.contextmanager
def held_stderr():
    """Holds everything written to fd 2 (by this process and its children); yields a ``Held``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield Held(held, saved)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


_ERROR_LINE = re.compile(r'^\s*(?:[\w.]+\.)?(?P<type>\w*(?:Error|Exception|Exit|Failed)): (?P<message>.+?)'
                         r'(?: \[while running [^\]]*\])?\s*$', re.MULTILINE)


def failure_line(error):
    """One line for an unexpected failure: the innermost ``Type: message`` in the runner's report."""
    text = ''.join(traceback.format_exception(error))
    found = _ERROR_LINE.findall(text)
    if not found:
        return f'{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ""}'.strip()
    kind, message = found[-1]
    return f'{kind}: {message}'


def write_log(error, held_output=b''):
    """Writes the traceback of ``error`` and what the run printed to a log file; returns its path."""
    with tempfile.NamedTemporaryFile('wb', prefix='build-dataset-', suffix='.log', delete=False) as log:
        log.write(''.join(traceback.format_exception(error)).encode())
        log.write(held_output)
    return log.name
