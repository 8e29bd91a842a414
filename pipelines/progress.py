"""Live progress of a build: a line at least every ``--progress_interval`` seconds, and Dataflow's job URL.

Local runs: Beam's FnApiRunner runs the whole job inside ``pipeline.run()`` and offers no progress
callback, but its SDK workers (threads or worker processes alike) answer the Fn API's
ProcessBundleProgressRequest with the running bundle's metrics, and every finished bundle returns its
own. ``CountingRunner`` keeps both: it asks each running bundle for progress (FnApiRunner's
``progress_request_frequency``, with a callback on Beam's ProgressRequester) and adds up the finished
bundles' user counters. ``Progress`` prints them from a thread while the job runs.

Dataflow: ``Progress.wait`` prints the job's console URL, then waits in steps of the interval and prints
the same counters from the job's metrics (the Dataflow API) after each step.

    build-dataset ... [--progress on|off] [--progress_interval SECONDS]
"""
import collections
import os
import sys
import threading
import time

from apache_beam.options.pipeline_options import GoogleCloudOptions
from apache_beam.runners.portability import portable_metrics
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.runner import PipelineState

DEFAULT_INTERVAL = 10.0
# (namespace, name) of the build's counters shown, by what the line calls them.
LISTED = ('listing', 'images_listed')
DECODED = ('decode', 'images_decoded')
DECODE_REJECTED = ('decode', 'images_rejected')
WRITTEN = ('write', 'records_written')
QUARANTINE_NAMESPACE = 'quarantine'
# The build's top-level steps that do the work, in pipeline order: a fused stage is named by its first.
STEPS = ('ListImages', 'MatchPrevious', 'Encode', 'Dedupe', 'AssignShards', 'WriteShards', 'WriteIndex', 'Publish')

_kept = None  # the user's stderr, kept by main() before a local run holds fd 2 (pipelines.console)


def keep_stderr():
    """Keeps a stream on the current fd 2 for the next Progress, so its lines reach the user while the
    build holds stderr."""
    global _kept  # pylint: disable=global-statement
    if _kept is not None:
        _kept.close()
    _kept = os.fdopen(os.dup(2), 'w', buffering=1)


def _take_kept_stderr():
    global _kept  # pylint: disable=global-statement
    kept, _kept = _kept, None
    return kept


def counters(monitoring_infos):
    """{(namespace, name): value} of the user counters in Fn API monitoring infos, summed over steps."""
    found = collections.Counter()
    for key, value in portable_metrics.from_monitoring_infos(monitoring_infos, user_metrics_only=True)[0].items():
        found[(key.metric.namespace, key.metric.name)] += value
    return found


def step_of(stage):
    """The first build step (of STEPS) a fused stage runs, else the step of its first transform."""
    names = [transform.unique_name.split('/', 1)[0] for transform in stage.transforms]
    return next((step for step in STEPS if step in names), names[0] if names else stage.name)


class Tally:
    """Counters of finished bundles plus the latest progress of running ones; thread-safe, never decreasing."""

    def __init__(self):
        self._lock = threading.Lock()
        self._finished = collections.Counter()
        self._running = {}
        self._shown = collections.Counter()
        self.stage = 'starting'

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


class CountingRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner keeping live user counters in ``self.tally``, polled every ``frequency`` seconds."""

    def __init__(self, frequency=1.0):
        super().__init__(progress_request_frequency=frequency)
        self.tally = Tally()

    def run_pipeline(self, pipeline, options):
        tally = self.tally

        class Requester(fn_runner.ProgressRequester):
            def __init__(self, worker_handler, instruction_id, frequency, callback=None):
                super().__init__(worker_handler, instruction_id, frequency,
                                 callback=lambda progress: tally.running(instruction_id, counters(
                                     progress.monitoring_infos)))
                self._id = instruction_id

            def stop(self):
                super().stop()
                tally.stopped(self._id)

        # Beam builds a ProgressRequester by its module name for each bundle: no other hook reaches it.
        original, fn_runner.ProgressRequester = fn_runner.ProgressRequester, Requester
        try:
            return super().run_pipeline(pipeline, options)
        finally:
            fn_runner.ProgressRequester = original

    def _execute_bundle(self, runner_execution_context, bundle_context_manager, bundle_input):
        self.tally.stage = step_of(bundle_context_manager.stage)
        result = super()._execute_bundle(runner_execution_context, bundle_context_manager, bundle_input)
        self.tally.finished(counters(result.process_bundle.monitoring_infos))
        return result


def describe(values, seconds, stage=None, decoding_seconds=None):
    """The progress line of counter ``values`` after ``seconds``: stage, counts, rate and ETA.

    The rate is of images decoded (or refused by decoding) over ``decoding_seconds`` (default ``seconds``).
    """
    values = collections.Counter(values)
    listed, decoded, written = values[LISTED], values[DECODED], values[WRITTEN]
    quarantined = sum(value for (namespace, _), value in values.items() if namespace == QUARANTINE_NAMESPACE)
    processed = decoded + values[DECODE_REJECTED]
    line = (f'build-dataset: {f"[{stage}] " if stage else ""}{seconds:.0f} s: listed {listed}, decoded {decoded}, '
            f'quarantined {quarantined}, written {written}')
    decoding_seconds = seconds if decoding_seconds is None else decoding_seconds
    if processed and decoding_seconds > 0:
        rate = processed / decoding_seconds
        line += f'; {rate:.1f} images/s'
        if listed > processed:
            line += f', ETA {(listed - processed) / rate:.0f} s'
    return line


class Progress:
    """Prints a build's progress to stderr while it runs; a context manager around ``pipeline.run()``.

        with Progress(pipeline, options, on, interval) as progress:
            progress.wait(pipeline.run())

    On a terminal the line updates in place; otherwise (a log) each report is its own line. Nothing is
    printed before the first interval has passed, so short builds stay quiet.
    """

    def __init__(self, pipeline, options, on=True, interval=DEFAULT_INTERVAL, stream=None):
        self._tally = getattr(pipeline.runner, 'tally', None)
        self._options = options
        self._on = on
        self._interval = interval
        self._kept = None if stream else _take_kept_stderr()
        self._stream = stream or self._kept or sys.stderr
        self._tty = self._stream.isatty()
        self._stop = threading.Event()
        self._thread = None
        self._start = None
        self._before_decoding = None  # the last time no image had been decoded yet
        self._printed = False

    def __enter__(self):
        self._start = self._before_decoding = time.monotonic()
        if self._on and self._tally is not None:
            self._thread = threading.Thread(target=self._report_until_stopped, name='build-progress', daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._printed:  # the final counts, then the line is left for the summary
                self._print(self._describe('done'))
                if self._tty:
                    self._stream.write('\n')
                    self._stream.flush()
        if self._kept is not None:
            self._kept.close()

    def _report_until_stopped(self):
        while not self._stop.wait(self._interval):
            self._print(self._describe(self._tally.stage))

    def _describe(self, stage, values=None):
        values = self._tally.snapshot() if values is None else values
        now = time.monotonic()
        if not values[DECODED] + values[DECODE_REJECTED]:
            self._before_decoding = now
        return describe(values, now - self._start, stage, now - self._before_decoding)

    def _print(self, line):
        self._printed = True
        if self._tty:
            self._stream.write('\r\033[K' + line)
        else:
            self._stream.write(line + '\n')
        self._stream.flush()

    def wait(self, result):
        """Waits for ``result`` to finish; for a Dataflow job, prints its URL, then its counters each interval."""
        if not getattr(result, 'has_job', False):
            return result.wait_until_finish()
        cloud = self._options.view_as(GoogleCloudOptions)
        self._line(f'build-dataset: Dataflow job {result.job_id()}: https://console.cloud.google.com/dataflow/jobs/'
                   f'{cloud.region}/{result.job_id()}?project={cloud.project}')
        while True:
            state = result.wait_until_finish(duration=int(self._interval * 1000))
            if PipelineState.is_terminal(state):
                return state
            if self._on:
                self._line(self._describe(state, job_counters(result)))

    def _line(self, text):
        self._stream.write(text + '\n')
        self._stream.flush()


def job_counters(result):
    """{(namespace, name): value} of a running job's user counters (attempted: not yet committed)."""
    found = collections.Counter()
    for counter in result.metrics().query()['counters']:
        found[(counter.key.metric.namespace, counter.key.metric.name)] += counter.attempted or 0
    return found
