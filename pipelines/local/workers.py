"""The local runner's worker processes: started early, stopped together, and an error if one dies.

Beam's multi-processing DirectRunner starts one worker process per core once the job's graph is built
and fused, and each spends a second or more importing Beam before it does any work; at the end it stops
them one after the other. Three features change that, each applied only for a local run and undone
after it (``imgrec.pipelines.local.internals``):

- **warm-workers.** Worker processes (``imgrec.pipelines.local.warm_worker``) are started when the build
  begins, so their imports overlap with building the graph. Beam starts a worker through
  ``local_job_service``'s module global ``subprocess``; while the feature is on, that global is a
  ``_WarmStart``, which hands out a warm process for Beam's worker command (read from Beam's own code,
  ``beam_worker_command``) with the environment Beam would have given it.
- **stop-together.** All workers are told to stop (``WorkerHandlerManager.close_all``) before Beam
  waits for the first to exit.
- **worker-deaths.** A dead worker is an error within seconds, not a hang. Beam starts workers from
  threads (``SubprocessSdkWorker.run``) and then waits for them to connect with no deadline. A worker's
  non-zero exit signals the main thread itself (``pthread_kill``: a signal sent to the process may land
  on another thread and leave the main one asleep) with SIGUSR1 and a handler of its own (SIGINT may be
  ignored, inherited from a parent), so the main thread fails with ``WorkerDied``.

Worker processes also start with glibc's malloc tuned so that memory freed after a stage goes back to
the system (``MALLOC_SETTINGS``, put in the environment the workers inherit for the run, ``malloc_env``;
``tune_malloc()`` does the same for the ``build-dataset`` process). By default each thread may get an
arena of its own, and the threshold above which a block is mapped apart (and unmapped when freed) rises
to the largest block freed, up to 32 MB: after the first large message of Beam's data plane, every later
one comes from the heap and stays with the process. At 20,000 images this cut the build's peak memory by
a tenth (docs/beam-internals.md). That part uses no Beam internal (``imgrec.pipelines.local.malloc``).
"""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading

import apache_beam
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.runners.worker import sdk_worker_main

import imgrec
from imgrec.console.errors import BuildFailed
from imgrec.console.supervisor import signal_cause
from imgrec.pipelines.local.checks import Unusable, arity, attribute, code_constants, function, parameters, require, uses
# The allocator's settings live apart, with no Beam import: build-dataset tunes its process before Beam loads.
from imgrec.pipelines.local.malloc import MALLOC_SETTINGS, malloc_env, tune_malloc  # noqa: F401  pylint: disable=unused-import

WARM_WORKER_MODULE = 'imgrec.pipelines.local.warm_worker'
# The folder that holds the imgrec package (the checkout, or site-packages), for the workers' import path.
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(imgrec.__file__)))


class WorkerDied(BuildFailed):
    """A local worker process exited with an error while the job ran: reported like any failed build, with
    what the workers printed kept in a log the line names."""
    keeps_held_output = True


def how_it_ended(error):
    """How a worker ended, from Beam's 'Worker subprocess exited with return code N': killed by a signal
    (a negative N), named as such; else Beam's words."""
    match = re.search(r'return code (-?\d+)', str(error))
    if match and int(match[1]) < 0:
        return f'was {signal_cause(-int(match[1]))}'
    return f'could not start or died ({error})'


def beam_worker_command():
    """The shell command Beam's FnApiRunner starts a multi-processing worker with, read from Beam's code.

    Beam builds it in ``FnApiRunner.run_pipeline`` from one string constant ('%s -m <harness module>'
    filled in with ``sys.executable``); Unusable when there is no longer exactly one such constant.
    """
    run_pipeline = function(fn_runner, 'FnApiRunner.run_pipeline')
    templates = [const for const in code_constants(run_pipeline)
                 if isinstance(const, str) and const.count('%s') == 1
                 and const.endswith(f' -m {sdk_worker_main.__name__}')]
    require(len(templates) == 1, f'Beam {apache_beam.__version__}: FnApiRunner.run_pipeline no longer builds '
                                 f'the worker command "python -m {sdk_worker_main.__name__}"')
    return templates[0] % sys.executable


def check_warm_workers():
    require(getattr(local_job_service, 'subprocess', None) is subprocess,
            f'Beam {apache_beam.__version__}: local_job_service has no module global subprocess')
    run = function(local_job_service, 'SubprocessSdkWorker.run')
    uses(run, 'SubprocessSdkWorker.run', 'subprocess', 'Popen')
    require(any(isinstance(const, tuple) and 'env' in const for const in code_constants(run)),
            f'Beam {apache_beam.__version__}: SubprocessSdkWorker.run no longer hands its worker an env')
    beam_worker_command()
    main = function(sdk_worker_main, 'main')
    arity(main, 'sdk_worker_main.main', 1)
    uses(main, 'sdk_worker_main.main', 'environ')


class _WarmStart:
    """Stands in for ``subprocess`` where Beam starts a worker: hands out a warm process when one is left."""

    def __init__(self, worker_command):
        self._worker_command = worker_command
        self._processes = []
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(subprocess, name)

    def start(self, count):
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [_PROJECT_ROOT, env.get('PYTHONPATH')]))
        with self._lock:
            self._processes = [subprocess.Popen([sys.executable, '-m', WARM_WORKER_MODULE],
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
        if command != self._worker_command:
            return subprocess.Popen(command, env=env, **kwargs)
        with self._lock:
            process = self._processes.pop() if self._processes else None
        if process is None:
            return subprocess.Popen(command, env=env, **kwargs)
        try:
            process.stdin.write((json.dumps(dict(os.environ if env is None else env)) + '\n').encode())
            process.stdin.close()
        except OSError:
            pass  # it died while warming up: Beam sees its exit status
        return process


@contextlib.contextmanager
def warm_workers(run):
    """``run.workers`` warm processes, handed to Beam for its worker command while the block runs."""
    warm = _WarmStart(beam_worker_command())
    original = local_job_service.subprocess
    warm.start(run.workers)
    local_job_service.subprocess = warm
    try:
        yield
    finally:
        local_job_service.subprocess = original
        warm.stop()


def check_stop_together():
    close_all = function(worker_handlers, 'WorkerHandlerManager.close_all')
    parameters(close_all, 'WorkerHandlerManager.close_all', ('self',))
    uses(close_all, 'WorkerHandlerManager.close_all', '_cached_handlers', 'close')
    attribute(worker_handlers, 'BeamFnControlServicer._DONE_MARKER')
    uses(function(worker_handlers, 'ControlConnection.push'), 'ControlConnection.push', '_DONE_MARKER')
    uses(function(worker_handlers, 'GrpcWorkerHandler.__init__'), 'GrpcWorkerHandler.__init__', 'control_conn')


def _tell_all_to_stop(manager):
    done = worker_handlers.BeamFnControlServicer._DONE_MARKER  # pylint: disable=protected-access
    for handlers in manager._cached_handlers.values():  # pylint: disable=protected-access
        for handler in set(handlers):
            if isinstance(handler, worker_handlers.GrpcWorkerHandler):
                handler.control_conn.push(done)


@contextlib.contextmanager
def stop_together(run):  # pylint: disable=unused-argument
    """Beam's close_all, after every worker was told to stop: Beam tells one and waits for it, in turn."""
    manager_class = worker_handlers.WorkerHandlerManager
    original = manager_class.__dict__['close_all']

    def close_all(manager):
        try:
            _tell_all_to_stop(manager)
        except Exception:  # pylint: disable=broad-except  # ours only: Beam's own close_all still stops them
            pass
        original(manager)

    manager_class.close_all = close_all
    try:
        yield
    finally:
        manager_class.close_all = original


def check_worker_deaths():
    run = function(local_job_service, 'SubprocessSdkWorker.run')
    parameters(run, 'SubprocessSdkWorker.run', ('self',))
    uses(run, 'SubprocessSdkWorker.run', 'RuntimeError', 'returncode')
    uses(function(worker_handlers, 'SubprocessSdkWorkerHandler.start_worker'),
         'SubprocessSdkWorkerHandler.start_worker', 'Thread', 'run')


class _Watcher:
    """Turns the first worker death while watching into WorkerDied, raised in the main thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._failure = None
        self._watching = True
        self._main_thread = threading.get_ident()

    def died(self, error):
        with self._lock:
            if self._watching and self._failure is None:
                self._failure = error
                signal.pthread_kill(self._main_thread, signal.SIGUSR1)  # wakes the main thread from its wait

    def stop(self):
        with self._lock:
            self._watching = False

    def raise_in_main(self, signum, frame):  # pylint: disable=unused-argument
        raise WorkerDied(f'a local Beam worker process {how_it_ended(self._failure)}')


@contextlib.contextmanager
def worker_deaths(run):  # pylint: disable=unused-argument
    """Within the block, a worker's non-zero exit raises WorkerDied in the calling (main) thread."""
    if threading.current_thread() is not threading.main_thread():
        raise Unusable('the build does not run on the main thread, which alone can take a signal')
    worker_class = local_job_service.SubprocessSdkWorker
    original = worker_class.__dict__['run']
    watcher = _Watcher()

    def run_worker(worker):
        try:
            original(worker)
        except RuntimeError as error:  # 'Worker subprocess exited with return code N'
            watcher.died(error)
            raise

    previous = signal.signal(signal.SIGUSR1, watcher.raise_in_main)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # a parent's mask is inherited
    worker_class.run = run_worker
    try:
        yield
    finally:
        worker_class.run = original
        watcher.stop()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGUSR1, previous)
