"""Live progress of a build: a line at least every ``--progress_interval`` seconds, and Dataflow's job URL.

Local runs: the runner counts as it goes (feature live-counters, whose counts ``imgrec.pipelines.local.internals.
live_tally`` hands over once its check passed); ``Progress`` prints them from a thread while the job runs.
With that feature off, a local build prints no progress lines; so does a portable runner's, whose
counters (``PipelineResult.metrics()``) exist only once the job is done.

Dataflow: ``Progress.wait`` prints the job's console URL, then waits in steps of the interval and prints
the same counters from the job's metrics (the Dataflow API, read by ``imgrec.contract.counters.read``) after
each step.

    build-dataset ... [--progress | --no_progress] [--progress_interval SECONDS]
"""
import collections
import os
import sys
import threading
import time

from apache_beam.options.pipeline_options import GoogleCloudOptions
from apache_beam.runners.runner import PipelineState

from imgrec.contract import counters
from imgrec.pipelines.local import internals

DEFAULT_INTERVAL = 10.0

_kept = None  # the user's stderr, kept by main() before a local run holds fd 2 (imgrec.console.held_stderr)


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


def describe(values, seconds, stage=None, decoding_seconds=None):
    """The progress line of counter ``values`` after ``seconds``: stage, counts, rate and ETA.

    The rate is of images decoded (or refused by decoding) over ``decoding_seconds`` (default ``seconds``); the
    images a rerun takes up from a stopped run of itself are counted apart (``resumed``), never decoded, and
    left out of the time left.
    """
    values = collections.Counter(values)
    listed, decoded = values[counters.IMAGES_LISTED], values[counters.IMAGES_DECODED]
    written, resumed = values[counters.RECORDS_WRITTEN], values[counters.IMAGES_RESUMED]
    quarantined = sum(value for (namespace, _), value in values.items() if namespace == counters.QUARANTINE)
    processed = decoded + values[counters.IMAGES_REJECTED]
    line = (f'build-dataset: {f"[{stage}] " if stage else ""}{seconds:.0f} s: listed {listed}, '
            + (f'resumed {resumed}, ' if resumed else '')
            + f'decoded {decoded}, quarantined {quarantined}, written {written}')
    decoding_seconds = seconds if decoding_seconds is None else decoding_seconds
    if processed and decoding_seconds > 0:
        rate = processed / decoding_seconds
        line += f'; {rate:.1f} images/s'
        if listed > processed + resumed:
            line += f', ETA {(listed - processed - resumed) / rate:.0f} s'
    return line


class Progress:
    """Prints a build's progress to stderr while it runs; a context manager around ``pipeline.run()``.

        with Progress(pipeline, options, on, interval) as progress:
            progress.wait(pipeline.run())

    On a terminal the line updates in place; otherwise (a log) each report is its own line. Nothing is
    printed before the first interval has passed, so short builds stay quiet.
    """

    def __init__(self, pipeline, options, on=True, interval=DEFAULT_INTERVAL, stream=None):
        self._tally = internals.live_tally(pipeline.runner)
        self._options = options
        self._on = on
        self._interval = interval
        self._kept = None if stream else _take_kept_stderr()
        self._stream = stream or self._kept or sys.stderr
        self._tty = self._stream.isatty()
        self._stop = threading.Event()
        self._thread = None
        self._start = 0.0  # both set as the block starts
        self._before_decoding = 0.0  # the last time no image had been decoded yet
        self._printed = False

    def __enter__(self):
        self._start = self._before_decoding = time.monotonic()
        if self._on and self._tally is not None:
            self._thread = threading.Thread(target=self._report_until_stopped, name='build-progress', daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind, error, trace):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._printed and kind is None:  # the final counts, then the line is left for the summary
                self._print(self._describe('done'))
            if self._printed and self._tty:  # a failure's or an interruption's line starts a line of its own
                self._stream.write('\n')
                self._stream.flush()
        if self._kept is not None:
            self._kept.close()

    def _report_until_stopped(self):
        while not self._stop.wait(self._interval) and not self._tally.broken:
            self._print(self._describe(self._tally.stage))

    def _describe(self, stage, values=None):
        values = self._tally.snapshot() if values is None else values
        now = time.monotonic()
        if not values[counters.IMAGES_DECODED] + values[counters.IMAGES_REJECTED]:
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
                self._line(self._describe(state, counters.read(result)))

    def _line(self, text):
        self._stream.write(text + '\n')
        self._stream.flush()

