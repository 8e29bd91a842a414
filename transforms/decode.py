"""Reads a batch of images (retrying transient errors), decodes, resizes and re-encodes each of them.

Images travel in batches (lists, ``imgrec.transforms.encode``): each crossing of Beam's data plane costs an
element's framing, coding and operations, so one element carries many images. The batch is only the
unit of transport: every image in it is read, decoded and judged on its own, so one bad input never
fails its batch. An input that cannot be used leaves alone through the ``rejected`` side output with a
reason code (``records.REASONS``), and its neighbours go on in the batch. A read that fails on a
transient error (timeout, reset, HTTP 429 or 5xx) is retried until the retry deadline
(``imgrec_storage.retries``); if it still fails the build fails with BuildFailed, since the file itself may
be fine and quarantining it would silently drop it. Only permanent read errors (missing, forbidden, a
symlink loop) are quarantined, as ``read_error``; a path that is no regular file (a FIFO, a device) is
never opened, and is quarantined as ``not_a_file`` (``local_storage.read_local``).

Reads run ahead of decoding, ``READ_AHEAD`` files within a batch, so a worker's core decodes while the
next files come off the disk or out of the bucket. A ``gs://`` read (tens of milliseconds of waiting) runs
on a thread of the DoFn's own, and is the read's first attempt; retries and their counters run in the
DoFn's thread, where Beam keeps metrics. A local file only gets a read-ahead hint to the kernel
(``Storage.will_read``): a thread would cost more in Python's lock than the read itself. The sha256 of a
source is taken as its bytes come in, on the thread that read them. A batch's decoded images keep their
order; everything is emitted from ``process``, so each output keeps its input's timestamp and window.

With ``decode_threads`` (a local in_memory run, whose runner runs a stage on one thread), the pixel work
of each image (read, decode, resize, encode, hashes: Pillow, hashlib and numpy let go of Python's lock
for most of it) runs on that many
threads of the DoFn's own, while its thread hands finished images on, so one process uses every core.
At most that many images are decoded at once, as with as many worker processes; ``DECODE_QUEUE`` more a
thread wait as bytes. A local file is read by the decode thread itself; a read it cannot make is
retried, or quarantined, on the DoFn's thread, as above. The work is the same function whatever the
thread, so the bytes are too.
"""
import collections
import concurrent.futures
import hashlib
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.reasons import READ_ERROR
from imgrec_console.errors import BuildFailed
from imgrec_imaging import image_ops
from imgrec_storage import retries
from imgrec.transforms.elements import EncodedImage, Rejected

REJECTED = 'rejected'
READ_AHEAD = 8  # files read ahead of the decoder, within a batch: at most this many sources held at once
# Images queued a decode thread, so none waits while the DoFn's thread hands the finished ones on.
DECODE_QUEUE = 3
# Finished images the DoFn's thread hands on each time it wakes (at most; always leaving each decode
# thread an image): waking once an image cost a switch of threads and of Python's lock an image.
EMIT_BATCH = 4


class _DecodeResizeEncodeFn(beam.DoFn):
    def __init__(self, options, read, storage, with_hash=False, decode_threads=0):
        self._options = options
        self._with_hash = with_hash
        self._decode_threads = decode_threads
        self._read = read
        self._storage = storage
        self.decoded = Metrics.counter(*counters.IMAGES_DECODED)
        self.rejected = Metrics.counter(*counters.IMAGES_REJECTED)
        self.bytes_read = Metrics.counter(*counters.BYTES_READ)
        self.source_bytes = Metrics.distribution(*counters.SOURCE_BYTES)
        self._pool = self._pending = self._decoding = self._decoders = None

    def setup(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(READ_AHEAD, thread_name_prefix='read-ahead')
        if self._decode_threads:
            self._decoders = concurrent.futures.ThreadPoolExecutor(self._decode_threads, thread_name_prefix='decode')

    def process(self, batch):
        """One batch of ImageRefs -> its EncodedImages as one list (none when every image was rejected), and
        each rejected image alone."""
        self._pending = collections.deque()
        self._decoding = collections.deque()
        outputs = []
        for ref in batch:
            self._pending.append((ref, self._start_read(ref.path)))
            while self._pending and (len(self._pending) > READ_AHEAD or self._pending[0][1] is _READ_BY_DECODER):
                self._advance(*self._pending.popleft(), outputs)
        while self._pending:
            self._advance(*self._pending.popleft(), outputs)
        while self._decoding:
            self._emit(*self._decoding.popleft(), outputs)
        rejected = [output for output in outputs if isinstance(output, beam.pvalue.TaggedOutput)]
        yield from rejected
        if len(rejected) < len(outputs):
            yield [output for output in outputs if not isinstance(output, beam.pvalue.TaggedOutput)]

    def teardown(self):
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._decoders is not None:
            self._decoders.shutdown(cancel_futures=True)

    def _start_read(self, path):
        """A callable that makes the first attempt at reading ``path``, begun now where it pays (its storage
        requests are counted when it is called, on the DoFn's thread); with decode threads, a local file
        is read by the thread that decodes it (``_READ_BY_DECODER``)."""
        storage = self._storage.for_path(path)
        if storage.remote:
            return retries.counted_submit(self._pool, self._read, path)
        if self._decoders is not None:
            return _READ_BY_DECODER
        storage.will_read(path)
        return lambda: self._read(path)

    def _advance(self, ref, first_attempt, outputs):
        """Starts decoding ``ref`` (reading it first, here or on a decode thread) and appends to ``outputs``,
        in input order, what is decoded beyond the decoders' queue."""
        if first_attempt is _READ_BY_DECODER:
            outcome = self._decoders.submit(self._read_and_image, ref.path)
        else:
            data = self._read_data(ref, first_attempt)
            if isinstance(data, beam.pvalue.TaggedOutput):  # not read: quarantined
                outcome = _Done((data, None))
            elif self._decoders is not None:
                outcome = self._decoders.submit(self._with_image, data)
            else:
                outcome = _Done(self._with_image(data))
        self._decoding.append((ref, outcome))
        if len(self._decoding) > DECODE_QUEUE * self._decode_threads:
            batch = max(1, min(EMIT_BATCH, len(self._decoding) - self._decode_threads))
            self._decoding[batch - 1][1].result()  # one wait for the batch: the older ones are done by then, mostly
            for _ in range(batch):
                self._emit(*self._decoding.popleft(), outputs)

    def _emit(self, ref, outcome, outputs):
        data, image = outcome.result()
        if isinstance(data, _FailedRead):  # a decode thread's read failed: retried (or quarantined) here
            data = self._read_data(ref, data.attempt)
            image = None if isinstance(data, beam.pvalue.TaggedOutput) else self._image(data)
        outputs.append(self._output(ref, data, image))

    def _reject(self, ref, reason, message, size):
        self.rejected.inc()
        return beam.pvalue.TaggedOutput(REJECTED, Rejected(ref.source, reason, message, size, ref.split, ref.label,
                                                           ref.mtime_ns, ref.generation, ref.ctime_ns, ref.inode))

    def _read_data(self, ref, first_attempt):
        """The bytes of ``ref``, or the Rejected output of a permanent read error."""
        attempts = iter([first_attempt])  # then a read of its own for each retry

        def attempt():
            return next(attempts, lambda: self._read(ref.path))()

        try:
            return retries.call(attempt, retries.READ, ref.path, self._storage.retry)
        except retries.RetriesExhausted as error:
            raise BuildFailed(f'cannot read {ref.path}: {error}') from error
        except Exception as error:  # a permanent error: the input is quarantined (not_a_file, else read_error)
            return self._reject(ref, getattr(error, 'quarantine_reason', READ_ERROR), retries.describe(error), -1)

    def _read_and_image(self, path):
        """On a decode thread: (bytes, image) of a local file; a failed read gives its error to the DoFn's
        thread, which retries it where Beam keeps the retry counters."""
        try:
            data = self._read(path)
        except Exception as error:  # pylint: disable=broad-except  # judged by retries, on the DoFn's thread
            return _FailedRead(error), None
        return self._with_image(data)

    def _with_image(self, data):
        return data, self._image(data)

    def _image(self, data):
        """(jpeg, notes, sha256 hex) of ``data``, or the ImageRejected: plain work, on any thread. The sha256
        is taken first, as the bytes come in (an image rejected later is not written, so needs none)."""
        digest = hashlib.sha256(data).hexdigest()
        try:
            jpeg, notes = image_ops.decode_resize_encode(data, self._options, with_hash=self._with_hash)
        except image_ops.ImageRejected as rejection:
            return rejection
        return jpeg, notes, digest

    def _output(self, ref, data, image):
        """The output of ``ref`` on the DoFn's thread, where its counters are kept."""
        if isinstance(data, beam.pvalue.TaggedOutput):  # the read was rejected
            return data
        self.bytes_read.inc(len(data))
        self.source_bytes.update(len(data))
        if isinstance(image, image_ops.ImageRejected):
            return self._reject(ref, image.reason, image.message, len(data))
        jpeg, notes, sha256 = image
        self.decoded.inc()
        height, width = self._options.image_size
        return EncodedImage(ref=ref, sha256=sha256, jpeg=jpeg, height=height, width=width,
                            source_bytes=len(data), decisions=image_ops.decisions(notes),
                            perceptual_hash=notes.get('perceptual_hash'), source_width=notes['source_width'],
                            source_height=notes['source_height'], upscaled=notes['upscaled'],
                            thumbnail=notes.get('thumbnail'))


# A local file that a decode thread reads itself, just before decoding it.
_READ_BY_DECODER = object()


class _FailedRead(typing.NamedTuple):
    """A first read that failed on a decode thread: ``attempt`` raises its error again."""
    error: BaseException

    def attempt(self):
        raise self.error


class _Done(typing.NamedTuple):
    """An outcome already known, with a future's ``result``."""
    value: object

    def result(self):
        return self.value


class _ReadOnce:
    """One attempt at reading a path, through the storage of its scheme."""

    def __init__(self, storage):
        self._storage = storage

    def __call__(self, path):
        return self._storage.for_path(path).read_once(path)


class DecodeResizeEncode(beam.PTransform):
    """Batches (lists) of ImageRef -> {'images': lists of EncodedImage, a batch's in its order, 'rejected':
    Rejected, one an image}, under ``options`` (a RecordOptions).

    ``read`` (path -> bytes, one attempt; default ``Storage.read_once`` of the path's storage, which
    ``storage`` hands on) is the read boundary, retried under ``storage.retry``. Tests pass a reader whose
    first reads fail. ``with_hash``: also the perceptual hash of each decoded image.
    ``decode_threads``: threads that decode alongside the DoFn's own (0: it decodes itself).
    """

    def __init__(self, options, storage, *, read=None, with_hash=False, decode_threads=0):
        super().__init__()
        self._fn = _DecodeResizeEncodeFn(options, read or _ReadOnce(storage), storage, with_hash, decode_threads)

    def expand(self, refs):
        results = refs | 'Decode' >> beam.ParDo(self._fn).with_outputs(REJECTED, main='images')
        return {'images': results.images, REJECTED: results[REJECTED]}


def _counted_decisions(image):
    for decision in image.decisions:
        Metrics.counter(counters.DECODE, decision).inc()
    return image.decisions


class CountDecisions(beam.PTransform):
    """EncodedImage -> (decision, images) pairs, a few dozen at most; each also a metric decode/<decision>."""

    def expand(self, images):
        return (images
                | 'Decisions' >> beam.FlatMap(_counted_decisions)
                | 'CountEach' >> beam.combiners.Count.PerElement())
