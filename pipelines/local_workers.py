"""A local worker process that dies is an error within seconds, not a hang.

Beam's local runner starts its worker processes from threads (``SubprocessSdkWorker.run``) and then waits
for them to connect, with no deadline: a worker that cannot start (a broken environment, no memory)
leaves the build waiting forever. ``watch()`` notes a worker's non-zero exit and signals the main
thread itself (``pthread_kill``: a signal sent to the process may land on another thread and leave
the main one asleep) with SIGUSR1 and a handler of its own (SIGINT may be ignored, inherited from a
parent), so the main thread fails with ``WorkerDied``. This wraps a Beam internal;
``tests/test_local_workers.py`` checks it against the pinned Beam.
"""
import contextlib
import signal
import threading

from apache_beam.runners.portability import local_job_service

from transforms.errors import BuildFailed

_lock = threading.Lock()
_failure = None
_watching = False
_main_thread = None


class WorkerDied(BuildFailed):
    """A local worker process exited with an error while the job ran: reported like any failed build."""


def _run(worker, original=local_job_service.SubprocessSdkWorker.run):
    global _failure  # pylint: disable=global-statement
    try:
        original(worker)
    except RuntimeError as error:  # 'Worker subprocess exited with return code N'
        with _lock:
            if _watching and _failure is None:
                _failure = error
                signal.pthread_kill(_main_thread, signal.SIGUSR1)  # wakes the main thread from its wait
        raise


local_job_service.SubprocessSdkWorker.run = _run


def _raise_worker_died(signum, frame):  # pylint: disable=unused-argument
    raise WorkerDied(f'a local Beam worker process could not start or died ({_failure}); '
                     f'run with --verbose to see its output')


@contextlib.contextmanager
def watch():
    """Turns a worker's death during the block into WorkerDied, raised in the calling (main) thread."""
    global _failure, _watching, _main_thread  # pylint: disable=global-statement
    previous = signal.signal(signal.SIGUSR1, _raise_worker_died)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # a parent's mask is inherited
    with _lock:
        _failure, _watching, _main_thread = None, True, threading.get_ident()
    try:
        yield
    finally:
        with _lock:
            _watching = False
        signal.signal(signal.SIGUSR1, previous)
