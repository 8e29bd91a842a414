"""Reads each image (retrying transient errors), decodes, resizes and re-encodes it.

Nothing about one input can fail the bundle: an input that cannot be read or used leaves through the
``rejected`` side output with a reason code (``records.REASONS``), and the build goes on.
"""
import hashlib
import logging
import random
import time

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import image_ops, storage
from transforms.records import READ_ERROR, EncodedImage, Rejected

REJECTED = 'rejected'
# Seconds to wait before each retry of a failed read (then jittered by +-50%): five attempts over ~15 s.
READ_RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)
# Errors that no retry can fix: the file is gone or forbidden.
_PERMANENT_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
_LOG = logging.getLogger(__name__)


def is_transient(error):
    """Whether a failed read is worth retrying: I/O trouble, HTTP 5xx, 408 or 429, not a missing file."""
    if isinstance(error, _PERMANENT_ERRORS):
        return False
    status = getattr(error, 'code', None)  # google.api_core errors carry the HTTP status
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return False
    return isinstance(error, OSError) or isinstance(status, int)  # OSError covers resets and timeouts


def read_with_retries(read, path, delays, on_retry=None):
    """``read(path)``, retried after each of ``delays`` seconds while the error is transient."""
    for delay in delays:
        try:
            return read(path)
        except Exception as error:  # classified just below; the last attempt raises as it is
            if not is_transient(error):
                raise
            if on_retry is not None:
                on_retry(error)
            _LOG.warning('read of %s failed (%s: %s); retrying in about %.0f s', path, type(error).__name__,
                         str(error).splitlines()[0] if str(error) else '', delay)
            time.sleep(delay * random.uniform(0.5, 1.5))
    return read(path)


class _DecodeResizeEncodeFn(beam.DoFn):
    def __init__(self, image_size, resize_mode, jpeg_quality, max_pixels, min_side, read, retry_delays):
        self._image_size = image_size
        self._resize_mode = resize_mode
        self._jpeg_quality = jpeg_quality
        self._max_pixels = max_pixels
        self._min_side = min_side
        self._read = read
        self._retry_delays = tuple(retry_delays)
        self.decoded = Metrics.counter('decode', 'images_decoded')
        self.rejected = Metrics.counter('decode', 'images_rejected')
        self.read_retries = Metrics.counter('decode', 'read_retries')
        self.bytes_read = Metrics.counter('decode', 'bytes_read')
        self.source_bytes = Metrics.distribution('decode', 'source_bytes')

    def _reject(self, ref, reason, message, size):
        self.rejected.inc()
        return beam.pvalue.TaggedOutput(REJECTED, Rejected(ref.source, reason, message, size, ref.split, ref.label,
                                                           ref.mtime_ns, ref.generation))

    def process(self, ref):
        try:
            data = read_with_retries(self._read, ref.path, self._retry_delays,
                                     on_retry=lambda error: self.read_retries.inc())
        except Exception as error:  # permanent, or transient past every retry: the input is quarantined
            yield self._reject(ref, READ_ERROR, f'{type(error).__name__}: {error}'.splitlines()[0], -1)
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

    ``read`` (path -> bytes) and ``retry_delays`` are the read boundary: whole-file reads through
    Beam's FileSystems, retried with backoff; tests pass a reader whose first reads fail.
    """

    def __init__(self, image_size, resize_mode='crop', jpeg_quality=90,
                 max_pixels=image_ops.DEFAULT_MAX_PIXELS, min_side=1, *, read=storage.read_bytes,
                 retry_delays=READ_RETRY_DELAYS):
        super().__init__()
        self._fn = _DecodeResizeEncodeFn(image_size, resize_mode, jpeg_quality, max_pixels, min_side, read,
                                         retry_delays)

    def expand(self, refs):
        results = refs | 'Decode' >> beam.ParDo(self._fn).with_outputs(REJECTED, main='images')
        return {'images': results.images, REJECTED: results[REJECTED]}


def _counted_decisions(image):
    for decision in image.decisions:
        Metrics.counter('decode', decision).inc()
    return image.decisions


class CountDecisions(beam.PTransform):
    """EncodedImage -> one {decision: images} dict (a small global aggregate); each also a metric decode/<decision>."""

    def expand(self, images):
        return (images
                | 'Decisions' >> beam.FlatMap(_counted_decisions)
                | 'CountEach' >> beam.combiners.Count.PerElement()
                | 'AsDict' >> beam.combiners.ToDict())
