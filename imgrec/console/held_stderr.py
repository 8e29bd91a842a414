"""Holding file descriptor 2, where libraries and child processes write their own lines.

TensorFlow and absl write to descriptor 2 from C++, at import and later, and which lines appear
depends on the CPU and the build (``TF_CPP_MIN_LOG_LEVEL`` does not silence absl's); local Beam
workers are separate processes that print a failing step's traceback there. So a command that is not
``--verbose`` points descriptor 2 at an unnamed temporary file while it runs: the lines are replayed
when the command wants them shown, and kept in the log of an unexpected failure. The file has no name,
so a run that ends, or is killed, leaves nothing behind. Under a supervising parent (``supervisor``) the
file is one the parent opened, so that it can still read what was held should the run die by a signal.
"""
import contextlib
import os
import sys
import tempfile

from imgrec.console import supervisor

TF_LOG_LEVEL = 'TF_CPP_MIN_LOG_LEVEL'


class Held:
    """What the run wrote to fd 2 meanwhile: ``read()`` returns it, ``replay()`` hands it to the user."""

    def __init__(self, stream, saved):
        self._stream = stream
        self._saved = saved

    def read(self):
        sys.stderr.flush()
        self._stream.seek(0)
        return self._stream.read()

    def replay(self):
        data = self.read()
        while data:  # a pipe may take less than all of it at once
            data = data[os.write(self._saved, data):]


class NotHeld:
    """Stands in for Held when nothing is held: there is nothing to read or replay."""

    def read(self):
        return b''

    def replay(self):
        pass


def quiet_tensorflow():
    """Fewer TensorFlow C++ lines (warnings and errors only), unless the user's environment says otherwise.

    Takes effect only if TensorFlow is not imported yet.
    """
    os.environ.setdefault(TF_LOG_LEVEL, '2')


def _held_file():
    if supervisor.held_file is not None:  # the supervising parent's: it reads it if this process dies
        stream = os.fdopen(os.dup(supervisor.held_file), 'w+b')
        stream.seek(0)
        stream.truncate()
        return stream
    return tempfile.TemporaryFile()  # unlinked at once: nothing to clean up after a kill


@contextlib.contextmanager
def held_stderr(enabled=True):
    """Holds everything written to fd 2 (by this process and its children); yields a Held.

    Not ``enabled``: holds nothing and yields a NotHeld. Either way fd 2 is the user's again afterwards.
    """
    if not enabled:
        yield NotHeld()
        return
    quiet_tensorflow()
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with _held_file() as held:
            os.dup2(held.fileno(), 2)
            try:
                yield Held(held, saved)
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)
