"""Keeps TensorFlow's log lines (C++, absl, oneDNN, Python warnings) off the user's terminal.

TensorFlow and absl write to file descriptor 2 from C++, at import and later, and which lines appear
depends on the CPU and the build: ``TF_CPP_MIN_LOG_LEVEL`` does not silence absl's. So, unless
``--verbose``, a command points descriptor 2 at a log file for as long as it runs and writes its own
messages to the original stderr. The log is deleted when the command ends, unless it is kept to hold the
traceback of an unexpected failure.
"""
import contextlib
import dataclasses
import os
import sys
import tempfile
import traceback


@dataclasses.dataclass
class Diversion:
    stream: object  # where the command's own messages go: the user's stderr
    log_path: str | None  # where everything else written to stderr goes (None: nowhere else)
    keep: bool = False

    def keep_traceback(self):
        """Appends the exception being handled to the log, keeps the log and returns its path."""
        sys.stderr.flush()
        with open(self.log_path, 'a') as log:
            traceback.print_exc(file=log)
        self.keep = True
        return self.log_path


@contextlib.contextmanager
def diverted(enabled=True, prefix='command-'):
    """Yields a ``Diversion``; when ``enabled``, stderr's descriptor points at a temporary log meanwhile."""
    if not enabled:
        yield Diversion(sys.stderr, None)
        return
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow loads: a smaller log
    sys.stderr.flush()
    saved = os.dup(2)
    log_fd, log_path = tempfile.mkstemp(prefix=prefix, suffix='.log')
    os.dup2(log_fd, 2)
    os.close(log_fd)
    # sys.stderr on descriptor 2 now writes to the log; a stand-in (pytest's capture) keeps its messages.
    on_descriptor = _descriptor(sys.stderr) == 2
    user = os.fdopen(os.dup(saved), 'w', buffering=1) if on_descriptor else sys.stderr
    diversion = Diversion(user, log_path)
    try:
        yield diversion
    finally:
        sys.stderr.flush()
        if on_descriptor:
            user.close()
        os.dup2(saved, 2)
        os.close(saved)
        if not diversion.keep:
            os.remove(log_path)


def _descriptor(stream):
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
