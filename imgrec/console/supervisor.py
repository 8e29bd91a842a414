"""A command that dies by a signal still ends in one line: the entry point forks, and the parent reports.

A process the kernel kills (out of memory), or one that aborts in C++ (gRPC cannot start a thread under
``ulimit -v``: status 134), runs no Python code to say so, and the stderr it held (``held_stderr``) would
vanish with it. So ``supervise`` forks before the command starts. The child runs the command as usual,
holding fd 2 in an unnamed file the parent opened (``held_file``), so nothing is left behind if both are
killed. The parent only waits:
- a child that exits reported for itself: the parent exits with its status;
- a child killed by a signal: the parent copies what the child held to a log file and prints
  ``<prog>: failed: ...`` naming the signal and the log; it exits with the shell's status for that
  signal (128 + N).

The two act as one process: the child dies with the parent (``PR_SET_PDEATHSIG``), SIGTERM and SIGHUP sent
to the parent are passed on, Ctrl-C reaches both (the parent ignores it and lets the child report), and a
child that stops itself (SIGSTOP) stops the parent too, until a SIGCONT resumes both.
"""
import ctypes
import mmap
import os
import signal
import sys
import tempfile
import warnings

held_file = None  # in a supervised child: the file descriptor of the unnamed file held_stderr keeps fd 2 in
_held_stream = None  # the child's reference to that file, which keeps it open
# The SIGTERMs the parent passed on, counted in memory both processes share: a SIGTERM to the whole process group
# (systemd's stop, kill -- -PGID) reaches the child twice, once from the sender and once passed on, and the child
# must take that for one (``sigterm_events``), not for the second SIGTERM that ends it at once.
_passed_on = mmap.mmap(-1, 8)
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
# What a signal most likely means, for the line.
_CAUSES = {
    signal.SIGKILL: 'killed (SIGKILL: the kernel sends it when memory runs out, as does kill -9)',
    signal.SIGABRT: 'aborted (SIGABRT), most often because memory or threads ran out (a limit such as ulimit -v)',
    signal.SIGSEGV: 'crashed (SIGSEGV)',
    signal.SIGBUS: 'crashed (SIGBUS)',
}


def supervise(prog):
    """Forks: returns in the child, which runs the command; the parent waits and never returns.

    Does nothing (returns at once) where there is no fork, or when this process is already supervised.
    """
    global held_file, _held_stream  # pylint: disable=global-statement
    if not hasattr(os, 'fork') or held_file is not None:
        return
    held = tempfile.TemporaryFile()  # pylint: disable=consider-using-with  # shared by both processes
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or both processes would write what is buffered
    parent = os.getpid()
    # Python 3.12 warns of a fork while threads run: here only OpenBLAS's and jemalloc's, whose libraries
    # set their state right in the child at fork (pthread_atfork); no gRPC channel or Beam thread exists yet.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        child = os.fork()
    if child == 0:
        held_file, _held_stream = held.fileno(), held
        _die_with(parent)
        return
    os._exit(_wait(prog, child, held))  # pylint: disable=protected-access  # nothing of the command's to tear down


def _die_with(parent):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: a killed parent leaves the child to finish alone
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)  # pylint: disable=protected-access


def _state(pid):
    """The process state letter of ``pid`` ('T' stopped), or None when it cannot be read."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii', errors='replace') as stream:
            text = stream.read()
    except OSError:
        return None
    return text[text.rfind(')') + 2:][:1]


def _wait(prog, child, held):
    """Waits for ``child``; returns the exit status, after the line when a signal ended it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C reaches the child, which reports it
    for number in _FORWARDED:
        signal.signal(number, lambda number, frame: _signal(child, number))
    while True:
        _, status = os.waitpid(child, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            if _state(child) == 'T':  # still stopped (a SIGCONT to the group may have resumed it already)
                os.kill(os.getpid(), signal.SIGSTOP)  # stopped as the child is, until a SIGCONT
                os.kill(child, signal.SIGCONT)
            continue
        break
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    number = os.WTERMSIG(status)
    held.seek(0)
    printed = held.read()
    where = f'; what it printed is in {_log(prog, printed)}' if printed else ''
    print(f'{prog}: failed: the {prog} process was {signal_cause(number)}{where}', file=sys.stderr, flush=True)
    return 128 + number


def _log(prog, data):
    with tempfile.NamedTemporaryFile('wb', prefix=f'{prog}-', suffix='.log', delete=False) as log:
        log.write(data)
    return log.name


def signal_cause(number):
    """What a process ended by signal ``number`` was, for a line: 'killed (SIGKILL: the kernel sends it...)'."""
    return _CAUSES.get(number, f'stopped by {_name(number)}')


def _signal(pid, number):
    if number == signal.SIGTERM:
        _passed_on[:8] = (int.from_bytes(_passed_on[:8], 'little') + 1).to_bytes(8, 'little')
    try:
        os.kill(pid, number)
    except ProcessLookupError:  # it has just ended: waitpid tells how
        pass


def sigterm_events(received):
    """How many times SIGTERM was sent, for a process that ``received`` it that many times: the parent's passed-on
    ones and the rest (sent to the child itself, or to the group) each count, and one sent to the group reaches
    the child both ways (the parent counts before it passes one on)."""
    passed_on = int.from_bytes(_passed_on[:8], 'little')
    return max(passed_on, received - passed_on)


def _name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f'signal {number}'


