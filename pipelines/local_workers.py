"""The local runner's worker processes: started early, stopped together, and an error if one dies.

Beam's multi-processing DirectRunner starts one worker process per core once the job's graph is built
and fused, and each spends a second or more importing Beam before it does any work; at the end it stops
them one after the other. This module changes three things, by patching Beam when it is imported (the
warm start only acts within ``local_run()``, which starts the warm processes):

- **Warm start.** Worker processes (``pipelines.warm_worker``) are started when the build begins, so
  their imports overlap with building the graph. When Beam starts a worker with its usual command, it
  gets a warm process instead, handed the environment Beam would have given (``_WarmStart``).
- **Stopping together.** All workers are told to stop before Beam waits for the first to exit.
- **A dead worker is an error within seconds, not a hang.** Beam starts workers from threads
  (``SubprocessSdkWorker.run``) and then waits for them to connect with no deadline. A worker's non-zero
  exit signals the main thread itself (``pthread_kill``: a signal sent to the process may land on another
  thread and leave the main one asleep) with SIGUSR1 and a handler of its own (SIGINT may be ignored,
  inherited from a parent), so the main thread fails with ``WorkerDied``.

Worker processes also start with glibc's malloc tuned so that memory freed after a stage goes back to
the system (``MALLOC_SETTINGS``; ``tune_malloc()`` does the same for the ``build-dataset`` process). By
default each thread may get an arena of its own, and the threshold above which a block is mapped apart
(and unmapped when freed) rises to the largest block freed, up to 32 MB: after the first large message
of Beam's data plane, every later one comes from the heap and stays with the process. At 20,000 images
this cut the build's peak memory by a tenth (README, Benchmarks). This wraps Beam internals;
``tests/test_local_workers.py`` checks it against the pinned Beam.
"""
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading

from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import worker_handlers

from imgrec_console.errors import BuildFailed

# glibc's environment variable -> (mallopt's parameter number from malloc.h, value)
MALLOC_SETTINGS = {'MALLOC_ARENA_MAX': (-8, 2), 'MALLOC_MMAP_THRESHOLD_': (-3, 1 << 20)}
_BEAM_WORKER_COMMAND = f'{sys.executable} -m apache_beam.runners.worker.sdk_worker_main'  # the FnApiRunner's
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def _stop_all_then_wait(manager, original=worker_handlers.WorkerHandlerManager.close_all):
    """Beam's close_all, after every worker was told to stop: Beam tells one and waits for it, in turn."""
    done = worker_handlers.BeamFnControlServicer._DONE_MARKER  # pylint: disable=protected-access
    for handlers in manager._cached_handlers.values():  # pylint: disable=protected-access
        for handler in set(handlers):
            if isinstance(handler, worker_handlers.GrpcWorkerHandler):
                handler.control_conn.push(done)
    original(manager)


class _WarmStart:
    """Stands in for ``subprocess`` where Beam starts a worker: hands out a warm process when one is left."""

    def __init__(self):
        self._processes = []
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(subprocess, name)

    def start(self, count):
        env = _worker_env(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [_PROJECT_ROOT, env.get('PYTHONPATH')]))
        with self._lock:
            self._processes = [subprocess.Popen([sys.executable, '-m', 'pipelines.warm_worker'],
                                                stdin=subprocess.PIPE, env=env) for _ in range(count)]

    def stop(self):
        """Ends the warm processes no worker was asked of (they hold nothing yet)."""
        with self._lock:
            left, self._processes = self._processes, []
        for process in left:
            process.kill()
            process.wait()
            process.stdin.close()

    def Popen(self, command, env=None, **kwargs):  # pylint: disable=invalid-name
        if command != _BEAM_WORKER_COMMAND:
            return subprocess.Popen(command, env=env, **kwargs)
        env = _worker_env(env if env is not None else os.environ)
        with self._lock:
            process = self._processes.pop() if self._processes else None
        if process is None:
            return subprocess.Popen(command, env=env, **kwargs)
        try:
            process.stdin.write((json.dumps(env) + '\n').encode())
            process.stdin.close()
        except OSError:
            pass  # it died while warming up: Beam sees its exit status
        return process


_warm = _WarmStart()
local_job_service.SubprocessSdkWorker.run = _run
local_job_service.subprocess = _warm
worker_handlers.WorkerHandlerManager.close_all = _stop_all_then_wait


def _raise_worker_died(signum, frame):  # pylint: disable=unused-argument
    raise WorkerDied(f'a local Beam worker process could not start or died ({_failure}); '
                     f'run with --verbose to see its output')


def _worker_env(env):
    """``env`` with MALLOC_SETTINGS, but for any the user set: each worker's C library reads them as it starts."""
    return {**{name: str(value) for name, (_, value) in MALLOC_SETTINGS.items()}, **env}


def tune_malloc():
    """MALLOC_SETTINGS for this process, but for any the user set. For a process that only builds: a
    library's caller may not want its allocator changed."""
    for name, (parameter, value) in MALLOC_SETTINGS.items():
        if name not in os.environ:
            with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
                ctypes.CDLL(None).mallopt(parameter, value)


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


@contextlib.contextmanager
def local_run(workers):
    """Around a local build: ``workers`` warm worker processes (0 for none), and ``watch()``."""
    _warm.start(workers)
    try:
        with watch():
            yield
    finally:
        _warm.stop()
