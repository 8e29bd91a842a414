"""Keeps TensorFlow's log lines (C++, absl, oneDNN, Python warnings) off the user's terminal.

TensorFlow and absl write to file descriptor 2 from C++, at import and later, and which lines appear
depends on the CPU and the build: ``TF_CPP_MIN_LOG_LEVEL`` does not silence absl's. So, unless
``--verbose``, a command points descriptor 2 at an unnamed temporary file for as long as it runs and
writes its own messages to the original stderr. Only an unexpected failure gives that log a name (with
the traceback appended), so a run that ends, or is killed, leaves no file behind.
"""
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import traceback


@dataclasses.dataclass
class Diversion:
    stream: object  # where the command's own messages go: the user's stderr
    log: object | None  # the unnamed file descriptor 2 writes to meanwhile (None: not diverted)
    prefix: str = 'command-'

    def keep_traceback(self):
        """Saves the log with the exception being handled appended, under a new name, and returns that name."""
        sys.stderr.flush()
        self.log.write(traceback.format_exc().encode())
        self.log.flush()
        self.log.seek(0)
        fd, path = tempfile.mkstemp(prefix=self.prefix, suffix='.log')
        with os.fdopen(fd, 'wb') as saved:
            shutil.copyfileobj(self.log, saved)
        return path


@contextlib.contextmanager
def diverted(enabled=True, prefix='command-'):
    """Yields a ``Diversion``; when ``enabled``, stderr's descriptor points at an unnamed log meanwhile."""
    if not enabled:
        yield Diversion(sys.stderr, None)
        return
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow loads: a smaller log
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:  # unlinked at once: nothing to clean up after a kill
        os.dup2(log.fileno(), 2)
        # sys.stderr on descriptor 2 now writes to the log; a stand-in (pytest's capture) keeps its messages.
        on_descriptor = _descriptor(sys.stderr) == 2
        user = os.fdopen(os.dup(saved), 'w', buffering=1) if on_descriptor else sys.stderr
        try:
            yield Diversion(user, log, prefix)
        finally:
            sys.stderr.flush()
            if on_descriptor:
                user.close()
            os.dup2(saved, 2)
            os.close(saved)


def _descriptor(stream):
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
