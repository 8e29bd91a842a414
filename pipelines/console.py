"""What the build prints on the user's terminal.

Local Beam workers are separate processes that print a failing step's traceback straight to file
descriptor 2. For a user mistake the job reports one line instead, so during a local run fd 2 is held
in a temporary file, and handed back unless the run ended in a reported mistake or failure.
"""
import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def held_stderr():
    """Holds everything written to fd 2 (by this process and its children); yields ``replay()``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)

        def replay():
            sys.stderr.flush()
            held.seek(0)
            os.write(saved, held.read())

        try:
            yield replay
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
