"""One run of a command: every failure ends in one line and an exit status, and the entry points' exit.

    def main(argv=None):
        with Command('verify-dataset') as command:
            args = parser.parse_args(argv)       # a mistake raises UserError: one line, status 2
            command.begin(verbose=args.verbose)  # from here on fd 2 is held unless --verbose
            ...
            return 0
        return command.status                     # set when the block ended in an error

``main`` stays callable in-process (tests); the console entry points call ``run_command(main)``.
"""
import contextlib
import logging
import os
import re
import signal
import sys
import tempfile
import traceback

from imgrec.console import supervisor
from imgrec.console.errors import CommandError
from imgrec.console.held_stderr import NotHeld, held_stderr

# The line of a traceback report that states its exception: unindented, after the frames' indented lines,
# '[module.]Type: message' or a bare type; a runner appends the step it ran.
_EXCEPTION_LINE = re.compile(r'^(?:\w+\.)*(?P<type>[A-Za-z_]\w*)(?:: (?P<message>.*?))?'
                             r'(?: \[while running [^\]]*\])?\s*$')
_TRACEBACK = 'Traceback (most recent call last):'


class Command:
    """A context for a command's body that turns what it raises into one line on stderr and ``status``.

    A CommandError prints ``<prog>: <word>: <message>``. Any other exception is unexpected: its
    traceback and what fd 2 held go to a log file the line names, unless ``verbose``, when it is
    raised on (a traceback). SystemExit (``--help``) and KeyboardInterrupt pass through.
    """

    def __init__(self, prog):
        self.prog = prog
        self.status = 0
        self.verbose = False
        self._hint = ''  # how to see the details, once the command has said it takes --verbose
        self._held = NotHeld()
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        return self

    def begin(self, verbose, hold=True):
        """Called once the arguments are known: holds fd 2 from here on, unless ``verbose`` or not ``hold``."""
        self.verbose = verbose
        self._hint = '; --verbose shows them'
        self._held = self._stack.enter_context(held_stderr(hold and not verbose))

    def release(self, replay=False):
        """Hands fd 2 back to the user, first replaying what it held when ``replay``."""
        if replay:
            self._held.replay()
        self._held = NotHeld()
        self._stack.close()

    def __exit__(self, kind, error, trace):
        if isinstance(error, CommandError):
            line, self.status = f'{self.prog}: {error.word}: {error}', error.exit_status
            held = self._held.read() if getattr(error, 'keeps_held_output', False) and not self.verbose else b''
            if held:  # what a dead worker process printed: kept in a log the line names
                line += f' (its output is in {write_log(self.prog, error, held)})'
        elif isinstance(error, Exception) and not self.verbose:  # disk full, a bug: the details go to a log
            log = write_log(self.prog, error, self._held.read())
            line, self.status = f'{self.prog}: failed: {failure_line(error)} (details in {log}{self._hint})', 1
        else:  # success; or raised on: --verbose's traceback, --help's SystemExit, Ctrl-C
            self.release()
            return False
        self.release()
        print(line, file=sys.stderr)
        return True


def failure_line(error):
    """One line for an unexpected failure: its cause, the last exception its report states that is not a
    wrapper of another's traceback. A runner re-raises a worker's failure as a RuntimeError whose message is
    the worker's traceback; the line names what the worker raised (a TruncatedRead), not the RuntimeError."""
    lines = ''.join(traceback.format_exception(error)).splitlines()
    found = None
    for before, line in zip([''] + lines, lines):
        if line[:1].isspace() or not before[:1].isspace():  # not the line that follows a traceback's frames
            continue
        match = _EXCEPTION_LINE.match(line)
        if match and not (match['message'] or '').startswith(_TRACEBACK):
            found = match
    if found is None:
        return f'{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ""}'.strip()
    return f"{found['type']}: {found['message']}" if found['message'] else found['type']


def was_interrupted(error):
    """Whether ``error`` is a Ctrl-C that a runner re-raised as its own exception: Beam's runners wrap what a
    step raised, KeyboardInterrupt too, in a RuntimeError ('KeyboardInterrupt [while running ...]')."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, KeyboardInterrupt):
            return True
        if any(_EXCEPTION_LINE.match(line) and _EXCEPTION_LINE.match(line)['type'] == 'KeyboardInterrupt'
               for line in str(error).splitlines() if not line[:1].isspace()):
            return True
        error = error.__cause__ or error.__context__
    return False


class _Sigterm:
    """SIGTERM turned into a KeyboardInterrupt in the main thread, so that the command stops as Ctrl-C stops it
    and says what it left (``terminated``); ``received`` tells the two apart afterwards, ``count`` is how many
    reached this process."""
    received = False
    count = 0


def _on_sigterm(number, frame):  # pylint: disable=unused-argument
    _Sigterm.count += 1
    if _Sigterm.received:
        if supervisor.sigterm_events(_Sigterm.count) < 2:  # one sent to the group, passed on by the parent too
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM: nothing more to wait for
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _Sigterm.received = True
    raise KeyboardInterrupt('SIGTERM')


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While the block runs (in the main thread), SIGTERM raises KeyboardInterrupt, as Ctrl-C does; a second
    SIGTERM ends the process at once. ``terminated()`` says afterwards whether SIGTERM came."""
    try:
        before = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: SIGTERM keeps its default
        yield
        return
    try:
        yield
    finally:
        if not _Sigterm.received:  # else a SIGTERM passed on late must not end the stop's own line
            signal.signal(signal.SIGTERM, before)


def terminated():
    """Whether SIGTERM stopped the command (``sigterm_as_interrupt``)."""
    return _Sigterm.received


def write_log(prog, error, held_output=b''):
    """Writes what the run printed to fd 2, then the traceback of ``error``, to a new log file; returns its path."""
    with tempfile.NamedTemporaryFile('wb', prefix=f'{prog}-', suffix='.log', delete=False) as log:
        log.write(held_output)
        log.write(''.join(traceback.format_exception(error)).encode())
    return log.name


def run_command(main, argv=None):
    """A console entry point: ``main(argv)``, then an exit with its status that skips the interpreter's teardown.

    After TensorFlow or Beam ran threads, tearing the interpreter down can abort the process
    (``terminate called without an active exception``, status 134) after everything was written, and
    unloading them takes a third of a second. So everything is flushed, then the process ends at once.
    """
    try:
        status = main(argv)
    except SystemExit as exit_:  # --help, or sys.exit() somewhere below
        status = exit_.code
    except KeyboardInterrupt:
        status = 130
    except BaseException:  # pylint: disable=broad-except  # a --verbose run's unexpected failure: its traceback
        traceback.print_exc()
        status = 1
    if status is None:
        status = 0
    elif not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(status)  # pylint: disable=protected-access
