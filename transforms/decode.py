"""Reads each image (retrying transient errors), decodes, resizes and re-encodes it.

One bad input never fails the bundle: an input that cannot be used leaves through the ``rejected``
side output with a reason code (``records.REASONS``), and the build goes on. A read that fails on a
transient error (timeout, reset, HTTP 429 or 5xx) is retried until the retry deadline
(``imgrec_storage.retries``); if it still fails the build fails with BuildFailed, since the file itself may
be fine and quarantining it would silently drop it. Only permanent read errors (missing, forbidden)
are quarantined, as ``read_error``.

Reads run ahead of decoding, ``READ_AHEAD`` files a bundle, so a worker's core decodes while the next
files come off the disk or out of the bucket. A ``gs://`` read (tens of milliseconds of waiting) runs on
a thread of the DoFn's own, and is the read's first attempt; retries and their counters run in the
DoFn's thread, where Beam keeps metrics. A local file only gets a read-ahead hint to the kernel
(``fileio.will_read``): a thread would cost more in Python's lock than the read itself. Outputs keep
their inputs' order, timestamps and windows.
"""
import collections
import concurrent.futures
import hashlib

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.utils.windowed_value import WindowedValue

from contract.reasons import READ_ERROR
from imgrec_console.errors import BuildFailed
from imgrec_imaging import image_ops
from imgrec_storage import fileio, gcs, retries
from transforms.elements import EncodedImage, Rejected

REJECTED = 'rejected'
READ_AHEAD = 8  # files read ahead of the decoder, per bundle: at most this many sources held at once


class _DecodeResizeEncodeFn(beam.DoFn):
    def __init__(self, image_size, resize_mode, jpeg_quality, max_pixels, min_side, read, retry_policy):
        self._image_size = image_size
        self._resize_mode = resize_mode
        self._jpeg_quality = jpeg_quality
        self._max_pixels = max_pixels
        self._min_side = min_side
        self._read = read
        self._retry_policy = retry_policy
        self.decoded = Metrics.counter('decode', 'images_decoded')
        self.rejected = Metrics.counter('decode', 'images_rejected')
        self.bytes_read = Metrics.counter('decode', 'bytes_read')
        self.source_bytes = Metrics.distribution('decode', 'source_bytes')
        self._pool = self._pending = None

    def setup(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(READ_AHEAD, thread_name_prefix='read-ahead')

    def start_bundle(self):
        self._pending = collections.deque()

    def process(self, ref, timestamp=beam.DoFn.TimestampParam, window=beam.DoFn.WindowParam):
        self._pending.append((ref, self._start_read(ref.path), timestamp, window))
        while len(self._pending) > READ_AHEAD:
            yield from self._finish(*self._pending.popleft())

    def finish_bundle(self):
        while self._pending:
            yield from self._finish(*self._pending.popleft())

    def teardown(self):
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def _start_read(self, path):
        """A callable that makes the first attempt at reading ``path``, begun now where it pays."""
        if gcs.is_gcs(path):
            return self._pool.submit(self._read, path).result
        fileio.will_read(path)
        return lambda: self._read(path)

    def _finish(self, ref, first_attempt, timestamp, window):
        for output in self._decoded(ref, first_attempt):
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, WindowedValue(output.value, timestamp, (window,)))
            else:
                yield WindowedValue(output, timestamp, (window,))

    def _reject(self, ref, reason, message, size):
        self.rejected.inc()
        return beam.pvalue.TaggedOutput(REJECTED, Rejected(ref.source, reason, message, size, ref.split, ref.label,
                                                           ref.mtime_ns, ref.generation))

    def _decoded(self, ref, first_attempt):
        attempts = iter([first_attempt])  # then a read of its own for each retry

        def attempt():
            return next(attempts, lambda: self._read(ref.path))()

        try:
            data = retries.call(attempt, retries.READ, ref.path, self._retry_policy)
        except retries.RetriesExhausted as error:
            raise BuildFailed(f'cannot read {ref.path}: {error}') from error
        except Exception as error:  # a permanent error: the input is quarantined
            yield self._reject(ref, READ_ERROR, retries.describe(error), -1)
            return
        self.bytes_read.inc(len(data))
        self.source_bytes.update(len(data))
        try:
            jpeg, notes = image_ops.decode_resize_encode(
                data, self._image_size, self._resize_mode, self._jpeg_quality,
                max_pixels=self._max_pixels, min_side=self._min_side)
        except image_ops.ImageRejected as rejection:
            yield self._reject(ref, rejection.reason, rejection.message, len(data))
            return
        self.decoded.inc()
        height, width = self._image_size
        yield EncodedImage(ref=ref, sha256=hashlib.sha256(data).hexdigest(), jpeg=jpeg, height=height, width=width,
                           source_bytes=len(data), decisions=image_ops.decisions(notes))


class DecodeResizeEncode(beam.PTransform):
    """ImageRef -> {'images': EncodedImage, 'rejected': Rejected}.

    ``read`` (path -> bytes, one attempt) is the read boundary, retried under ``retry_policy``
    (``retries.RetryPolicy``; default ``retries.default_policy()``: a deadline per file). Tests
    pass a reader whose first reads fail.
    """

    def __init__(self, image_size, resize_mode='crop', jpeg_quality=90,
                 max_pixels=image_ops.DEFAULT_MAX_PIXELS, min_side=1, *, read=fileio.read_once,
                 retry_policy=None):
        super().__init__()
        self._fn = _DecodeResizeEncodeFn(image_size, resize_mode, jpeg_quality, max_pixels, min_side, read,
                                         retry_policy or retries.default_policy())

    def expand(self, refs):
        results = refs | 'Decode' >> beam.ParDo(self._fn).with_outputs(REJECTED, main='images')
        return {'images': results.images, REJECTED: results[REJECTED]}


def _counted_decisions(image):
    for decision in image.decisions:
        Metrics.counter('decode', decision).inc()
    return image.decisions


class CountDecisions(beam.PTransform):
    """EncodedImage -> (decision, images) pairs, a few dozen at most; each also a metric decode/<decision>."""

    def expand(self, images):
        return (images
                | 'Decisions' >> beam.FlatMap(_counted_decisions)
                | 'CountEach' >> beam.combiners.Count.PerElement())
