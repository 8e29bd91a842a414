"""Every Beam internal the project relies on, in one list: what each buys, how it is checked, how applied.

Each feature below uses private parts of Apache Beam. None is applied at import: a local build applies
the ones it needs for its run (``local_run``, ``gcs_emulator``) and undoes them after it, even when the
run fails; a Dataflow submission applies none. Before a feature is first used, its check looks at the
Beam it runs on (the attributes exist, take the arguments, and are used by Beam as assumed). A feature
whose check fails is off, with one line on stderr saying which and why, and the build goes on with stock
Beam: a Beam upgrade costs speed or live progress, never a build.

    IMGREC_BEAM_PATCHES=off                          stock Beam: every feature off
    IMGREC_BEAM_PATCHES=warm-workers,stop-together   only the features named are on
    IMGREC_BEAM_PATCHES=on                           every feature on (the default)

docs/beam-internals.md tells what each buys and what happens without it; tests/test_beam_internals.py
holds the canaries that compare them with the Beam installed.
"""
import contextlib
import os
import sys
import typing

from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from google.protobuf import json_format, struct_pb2

from imgrec.storage import gcs_storage
from imgrec.pipelines.local import emulator, live_counters, workers
from imgrec.pipelines.local.checks import Unusable

ENV = 'IMGREC_BEAM_PATCHES'
WARM_WORKERS = 'warm-workers'
STOP_TOGETHER = 'stop-together'
WORKER_DEATHS = 'worker-deaths'
LIVE_COUNTERS = 'live-counters'
EMULATOR_CREDENTIALS = 'emulator-credentials'

_LOCAL_JOB_SERVICE = 'apache_beam.runners.portability.local_job_service'
_WORKER_HANDLERS = 'apache_beam.runners.portability.fn_api_runner.worker_handlers'
_FN_RUNNER = 'apache_beam.runners.portability.fn_api_runner.fn_runner'
_AUTH = 'apache_beam.internal.gcp.auth'


class Internal(typing.NamedTuple):
    """A feature built on Beam internals."""
    name: str  # as IMGREC_BEAM_PATCHES and the "off" line call it
    uses: str  # the Beam internals it reads or replaces
    buys: str
    without: str  # what a build does with the feature off
    check: typing.Callable[[], None]  # raises Unusable (or anything) when Beam no longer behaves as assumed
    apply: typing.Callable  # apply(run) -> a context manager: on within it, undone after it
    patches: tuple  # (module, attribute path) it replaces while applied: what tests snapshot


INTERNALS = (
    Internal(
        WARM_WORKERS,
        'local_job_service.subprocess (module global), SubprocessSdkWorker.run, the worker command in '
        'FnApiRunner.run_pipeline, sdk_worker_main.main',
        "worker processes start as the build starts, importing Beam while the graph is built; with "
        "stop-together, a local build's fixed start-up cost fell from 6.2-6.7 s to 4.9 s",
        'Beam starts its workers once the graph is fused, and each imports Beam then (about 1 s more a build)',
        workers.check_warm_workers, workers.warm_workers,
        ((_LOCAL_JOB_SERVICE, 'subprocess'),)),
    Internal(
        STOP_TOGETHER,
        'WorkerHandlerManager.close_all, BeamFnControlServicer._DONE_MARKER, GrpcWorkerHandler.control_conn',
        'every worker is told to stop before Beam waits for the first (part of the 4.9 s above)',
        'Beam stops the workers one after the other, waiting for each (a few tenths of a second a worker)',
        workers.check_stop_together, workers.stop_together,
        ((_WORKER_HANDLERS, 'WorkerHandlerManager.close_all'),)),
    Internal(
        WORKER_DEATHS,
        'SubprocessSdkWorker.run (its RuntimeError on a non-zero exit), the thread that runs it',
        'a local worker that cannot start or dies fails the build in one line within seconds',
        'Beam waits with no deadline for a dead worker to connect: the build hangs until it is killed',
        workers.check_worker_deaths, workers.worker_deaths,
        ((_LOCAL_JOB_SERVICE, 'SubprocessSdkWorker.run'),)),
    Internal(
        LIVE_COUNTERS,
        'FnApiRunner._execute_bundle, fn_runner.ProgressRequester (module global), portable_metrics',
        "a local build's progress lines: stage, counts, rate and ETA while it runs",
        'no progress lines on a local build (the summary at the end is the same); Dataflow is unaffected',
        live_counters.check, live_counters.requesting_progress,
        ((_FN_RUNNER, 'ProgressRequester'),)),
    Internal(
        EMULATOR_CREDENTIALS,
        'auth._Credentials (its credential cache)',
        "against a GCS emulator (STORAGE_EMULATOR_HOST) only: Beam's GCS clients skip their search for "
        'credentials',
        'against an emulator, each process first searches for credentials (about 20 s) and logs a warning; '
        'real GCS is unaffected',
        emulator.check, emulator.anonymous,
        ((_AUTH, '_Credentials._credentials'), (_AUTH, '_Credentials._credentials_init'))),
)
BY_NAME = {internal.name: internal for internal in INTERNALS}

_checked = {}  # name -> None when usable, else why not: each feature is checked once a process


def selected(environ=None):
    """The names of the features IMGREC_BEAM_PATCHES switches on; ValueError for a name it does not know."""
    text = (os.environ if environ is None else environ).get(ENV, '').strip().lower()
    if text in ('', 'on', 'all'):
        return frozenset(BY_NAME)
    if text in ('off', 'none'):
        return frozenset()
    names = {name.strip() for name in text.split(',') if name.strip()}
    unknown = sorted(names - set(BY_NAME))
    if unknown:
        raise ValueError(f"{ENV} names no feature {', '.join(unknown)}: give on, off or some of "
                         f"{', '.join(BY_NAME)}, comma-separated")
    return frozenset(names)


def enabled(name):
    """Whether IMGREC_BEAM_PATCHES switches feature ``name`` on (a value it cannot read switches all off)."""
    try:
        return name in selected()
    except ValueError:
        return False


def _say_off(name, reason):
    reason = ' '.join(str(reason).split())  # one line, whatever the message
    print(f'build-dataset: {name} off: {reason}', file=sys.stderr, flush=True)


def usable(name):
    """Whether feature ``name`` is switched on and its check passed; the first failed check says so in one line."""
    if not enabled(name):
        return False
    if name not in _checked:
        try:
            BY_NAME[name].check()
            _checked[name] = None
        except Exception as error:  # pylint: disable=broad-except  # whatever a changed Beam raises
            reason = str(error) if isinstance(error, Unusable) else f'check failed: {type(error).__name__}: {error}'
            _checked[name] = reason
            _say_off(name, reason)
    return _checked[name] is None


def forget():
    """Forgets every check's result, so the next use checks again (tests change Beam in between)."""
    _checked.clear()


def needed(workers_count, progress):
    """The features a local run uses: with worker processes, with progress lines, against an emulator."""
    names = [WARM_WORKERS, STOP_TOGETHER, WORKER_DEATHS] if workers_count else []
    if progress:
        names.append(LIVE_COUNTERS)
    if os.environ.get(gcs_storage.EMULATOR_HOST):
        names.append(EMULATOR_CREDENTIALS)
    return names


def check(names):
    """Checks the features ``names`` now (say, before stderr is held), so an "off" line reaches the user at once."""
    for name in names:
        usable(name)


@contextlib.contextmanager
def patched(names, run=None):
    """Applies the usable features of ``names`` (in INTERNALS order) for the block; undoes them after it."""
    with contextlib.ExitStack() as stack:
        for internal in INTERNALS:
            if internal.name in names and usable(internal.name):
                try:
                    stack.enter_context(internal.apply(run))
                except Unusable as error:
                    _say_off(internal.name, error)
        yield


def _provision(worker_plugins):
    """What the FnApiRunner hands its worker processes: by default no job options at all, so a job's
    ``--beam_plugins`` never reaches them; these carry the plugins (FnApiRunner's public ``provision_info``)."""
    if not worker_plugins:
        return None
    options = json_format.ParseDict({'beam:option:beam_plugins:v1': list(worker_plugins)}, struct_pb2.Struct())
    return fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(
        retrieval_token='unused-retrieval-token', pipeline_options=options))


def runner(progress=True, worker_plugins=()):
    """Beam's Python FnApiRunner, counting live for progress lines when asked and feature live-counters is usable;
    its worker processes (if any) first import the modules ``worker_plugins``."""
    provision = _provision(worker_plugins)
    if progress and usable(LIVE_COUNTERS):
        return live_counters.CountingRunner(provision_info=provision)
    return fn_runner.FnApiRunner(provision_info=provision)


def live_tally(runner):
    """The live counts (``live_counters.Tally``) of ``runner`` when it is the counting runner of feature
    live-counters and that feature is usable, else None: what a progress line may read while a run runs."""
    if isinstance(runner, live_counters.CountingRunner) and usable(LIVE_COUNTERS):
        return runner.tally
    return None


class LocalRun(typing.NamedTuple):
    workers: int  # worker processes (0: none, the runner is not multi-processing)
    runner: object


@contextlib.contextmanager
def local_run(workers_count, progress):
    """Around a local run: yields a LocalRun whose runner to use; its features are applied until the block ends."""
    # Against an emulator, worker processes make Beam's GCS clients anonymous first (emulator-credentials).
    plugins = [WORKER_PLUGIN] if workers_count and os.environ.get(gcs_storage.EMULATOR_HOST) else []
    run = LocalRun(workers_count, runner(progress, plugins))
    names = set(needed(workers_count, progress)) - {EMULATOR_CREDENTIALS}
    with workers.malloc_env(), patched(names, run):
        yield run


def gcs_emulator():
    """Around everything a local build does against a GCS emulator: Beam's GCS clients connect anonymously."""
    return patched({EMULATOR_CREDENTIALS} if os.environ.get(gcs_storage.EMULATOR_HOST) else set())


# The module Beam's local workers import first (--beam_plugins) against an emulator: named, not
# imported, here, since importing it acts.
WORKER_PLUGIN = 'imgrec.pipelines.local.worker_plugin'
