"""Live counters of a local run, for the progress lines (feature live-counters).

Beam's FnApiRunner runs the whole job inside ``pipeline.run()`` and offers no progress callback, but its
SDK workers (threads or worker processes alike) answer the Fn API's ProcessBundleProgressRequest with
the running bundle's metrics, and every finished bundle returns its own. ``CountingRunner`` keeps both
in a ``Tally``: it asks each running bundle for progress (FnApiRunner's ``progress_request_frequency``,
with a callback on the ProgressRequester that Beam builds by its module name, swapped for the run by
``requesting_progress``) and adds up the finished bundles' user counters (``_execute_bundle``).

Counters are keyed by ``imgrec.contract.counters.Counter``. A bundle's values are what it did, so the
committed-versus-attempted rule of ``imgrec.contract.counters`` has nothing to choose between here. Any error
in this bookkeeping ends the live counts, never the build.
"""
import collections
import contextlib
import sys
import threading

import apache_beam
from apache_beam.runners.portability import portable_metrics
from apache_beam.runners.portability.fn_api_runner import fn_runner

from imgrec.contract import counters as job_counters
from imgrec.pipelines.local.checks import attribute, function, parameters, require, uses

_EXECUTE_BUNDLE = ('self', 'runner_execution_context', 'bundle_context_manager', 'bundle_input')
_REQUESTER = ('self', 'worker_handler', 'instruction_id', 'frequency', 'callback')


def check():
    execute = function(fn_runner, 'FnApiRunner._execute_bundle')
    parameters(execute, 'FnApiRunner._execute_bundle', _EXECUTE_BUNDLE)
    uses(function(fn_runner, 'FnApiRunner.run_stages'), 'FnApiRunner.run_stages', '_execute_bundle')
    requester = attribute(fn_runner, 'ProgressRequester')
    require(isinstance(requester, type), f'Beam {apache_beam.__version__}: fn_runner.ProgressRequester is no class')
    parameters(requester.__init__, 'ProgressRequester.__init__', _REQUESTER)
    function(fn_runner, 'ProgressRequester.stop')
    uses(function(fn_runner, 'BundleManager.process_bundle'), 'BundleManager.process_bundle', 'ProgressRequester')
    require('progress_request_frequency' in function(fn_runner, 'FnApiRunner.__init__').__code__.co_varnames,
            f'Beam {apache_beam.__version__}: FnApiRunner takes no progress_request_frequency')
    from_infos = function(portable_metrics, 'from_monitoring_infos')
    require('user_metrics_only' in from_infos.__code__.co_varnames,
            f'Beam {apache_beam.__version__}: portable_metrics.from_monitoring_infos takes no user_metrics_only')


def counters(monitoring_infos):
    """{Counter: value} of the user counters in Fn API monitoring infos, summed over steps."""
    found = collections.Counter()
    for key, value in portable_metrics.from_monitoring_infos(monitoring_infos, user_metrics_only=True)[0].items():
        found[job_counters.Counter(key.metric.namespace, key.metric.name)] += value
    return found


def step_of(stage):
    """The first build step (of contract.counters.STEPS) a fused stage runs, else the step of its first transform."""
    names = [transform.unique_name.split('/', 1)[0] for transform in stage.transforms]
    return next((step for step in job_counters.STEPS if step in names), names[0] if names else stage.name)


class Tally:
    """Counters of finished bundles plus the latest progress of running ones; thread-safe, never decreasing."""

    def __init__(self):
        self._lock = threading.Lock()
        self._finished = collections.Counter()
        self._running = {}
        self._shown = collections.Counter()
        self.stage = 'starting'
        self.broken = False

    def running(self, instruction_id, values):
        with self._lock:
            self._running[instruction_id] = values

    def stopped(self, instruction_id):
        with self._lock:
            self._running.pop(instruction_id, None)

    def finished(self, values):
        with self._lock:
            self._finished.update(values)

    def snapshot(self):
        with self._lock:
            total = collections.Counter(self._finished)
            for values in self._running.values():
                total.update(values)
            # A bundle's last progress is dropped a moment before its final metrics are added.
            for key, value in total.items():
                self._shown[key] = max(self._shown[key], value)
            return collections.Counter(self._shown)

    def safely(self, function, *args):
        """``function(*args)`` unless counting broke; an error in it ends the live counts (one line), not the build."""
        if self.broken:
            return
        try:
            function(*args)
        except Exception as error:  # pylint: disable=broad-except
            self.broken = True
            print(f'build-dataset: live progress off: {type(error).__name__}: {error}', file=sys.stderr)

    def enter(self, stage):
        """Notes the build step that a bundle of fused ``stage`` is about to run."""
        self.stage = step_of(stage)


class CountingRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner keeping live user counters in ``self.tally``, polled every ``frequency`` seconds."""

    def __init__(self, frequency=1.0, provision_info=None):
        super().__init__(progress_request_frequency=frequency, provision_info=provision_info)
        self.tally = Tally()

    def _execute_bundle(self, runner_execution_context, bundle_context_manager, bundle_input):
        self.tally.safely(self.tally.enter, bundle_context_manager.stage)
        result = super()._execute_bundle(runner_execution_context, bundle_context_manager, bundle_input)
        self.tally.safely(lambda: self.tally.finished(counters(result.process_bundle.monitoring_infos)))
        return result


@contextlib.contextmanager
def requesting_progress(run):
    """Within the block, Beam's ProgressRequester (built by its module name for each bundle) also hands
    each progress report to ``run.runner.tally``: no other hook reaches it."""
    tally = getattr(run.runner, 'tally', None)
    original = fn_runner.ProgressRequester
    if tally is None:
        yield
        return

    class Requester(original):
        def __init__(self, worker_handler, instruction_id, frequency, callback=None):
            super().__init__(worker_handler, instruction_id, frequency, callback=self._report)
            self._id = instruction_id
            self._then = callback

        def _report(self, progress):
            tally.safely(lambda: tally.running(self._id, counters(progress.monitoring_infos)))
            if self._then is not None:
                self._then(progress)

        def stop(self):
            super().stop()
            tally.safely(tally.stopped, self._id)

    fn_runner.ProgressRequester = Requester
    try:
        yield
    finally:
        fn_runner.ProgressRequester = original
