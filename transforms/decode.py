"""Reads a batch of images (retrying transient errors), decodes, resizes and re-encodes each of them.

Images travel in batches (lists, ``imgrec.transforms.encode``): each crossing of Beam's data plane costs an
element's framing, coding and operations, so one element carries many images. The batch is only the
unit of transport: every image in it is read, decoded and judged on its own, so one bad input never
fails its batch. An input that cannot be used leaves alone through the ``rejected`` side output with a
reason code (``records.REASONS``), and its neighbours go on in the batch. A read that fails on a
transient error (timeout, reset, HTTP 429 or 5xx) is retried until the retry deadline
(``imgrec.storage.retries``); if it still fails the build fails with BuildFailed, since the file itself may
be fine and quarantining it would silently drop it. Only permanent read errors (missing, forbidden, a
symlink loop) are quarantined, as ``read_error``; a path that is no regular file (a FIFO, a device) is
never opened, and is quarantined as ``not_a_file`` (``local_storage.read_local``).

Reads run ahead of decoding, ``READ_AHEAD`` files within a batch, so a worker's core decodes while the
next files come off the disk or out of the bucket. A ``gs://`` read (tens of milliseconds of waiting) runs
on a thread of the DoFn's own, and is the read's first attempt; retries and their counters run in the
DoFn's thread, where Beam keeps metrics. A local file only gets a read-ahead hint to the kernel
(``Storage.will_read``): a thread would cost more in Python's lock than the read itself. The sha256 of a
source is taken as its bytes come in, on the thread that read them. A batch's decoded images keep their
order.

With ``decoders`` (a local in_memory run, whose runner runs every stage on one thread), the pixel work of
each image (read, sha256, decode, resize, encode, perceptual hash) runs on that many threads of the DoFn's
own (``imgrec.imaging.decoder_pool``), so one build uses every core. A batch is handed over whole, and
its outputs leave when the next batch has been handed over, so the decoders work while the DoFn's thread
(and the steps fused after it) handle what came out; the last batch of a bundle leaves from
``finish_bundle``. A local file is read by its
decoder; a read it cannot make is retried, or quarantined, on the DoFn's thread, as above. The work is the
same function wherever it runs, so the bytes are too.
"""
import collections
import concurrent.futures
import hashlib

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from imgrec.contract import counters
from imgrec.contract.reasons import READ_ERROR
from imgrec.console.errors import BuildFailed
from imgrec.imaging import decoder_pool, image_ops
from imgrec.storage import retries
from imgrec.transforms.elements import EncodedImage, Rejected

REJECTED = 'rejected'
# Files read ahead of the decoder, within a batch: at most this many sources held at once. With decoders,
# a batch's remote sources are read ahead here and held until decoded: at most two batches' worth.
READ_AHEAD = 8


class _DecodeResizeEncodeFn(beam.DoFn):
    def __init__(self, options, read, storage, with_hash=False, with_digest=False, decoders=0):
        self._options = options
        self._with_hash = with_hash
        self._with_digest = with_digest
        self._decoders = decoders
        self._read = read
        self._storage = storage
        self.decoded = Metrics.counter(*counters.IMAGES_DECODED)
        self.rejected = Metrics.counter(*counters.IMAGES_REJECTED)
        self.bytes_read = Metrics.counter(*counters.BYTES_READ)
        self.source_bytes = Metrics.distribution(*counters.SOURCE_BYTES)
        self._pool = self._pixel_work = self._held = None

    def setup(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(READ_AHEAD, thread_name_prefix='read-ahead')
        if self._decoders:
            self._pixel_work = decoder_pool.DecoderPool(self._decoders, self._options, self._with_hash, self._read)

    def start_bundle(self):
        self._held = None

    def process(self, batch):
        """One batch of ImageRefs -> its EncodedImages as one list (none when every image was rejected), and
        each rejected image alone. With decoders, a batch's outputs leave when the next batch has been handed
        to them (the last in ``finish_bundle``), so they decode while this thread works on what came out."""
        if self._pixel_work is None:
            yield from _split(self._decoded_here(batch))
            return
        started = self._started(batch)
        if self._held is not None:
            yield from _split(self._finished(*self._held))
        self._held = started

    def finish_bundle(self):
        if self._held is None:
            return
        held, self._held = self._held, None
        for output in _split(self._finished(*held)):  # a build's pipeline has only the global window
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
            else:
                yield GlobalWindows.windowed_value(output)

    def teardown(self):
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._pixel_work is not None:
            self._pixel_work.shutdown()

    def _decoded_here(self, batch):
        """The outputs of ``batch``, in its order, decoded on this thread, reads running ahead."""
        outputs: list = []
        pending: collections.deque = collections.deque()
        for ref in batch:
            pending.append((ref, self._start_read(ref.path)))
            if len(pending) > READ_AHEAD:
                outputs.append(self._decoded(*pending.popleft()))
        outputs.extend(self._decoded(*entry) for entry in pending)
        return outputs

    def _decoded(self, ref, first_attempt):
        data = self._read_data(ref, first_attempt)
        if isinstance(data, beam.pvalue.TaggedOutput):  # not read: quarantined
            return data
        return self._output(ref, len(data), decoder_pool.encoded(data, self._options, self._with_hash))

    def _started(self, batch):
        """(batch, what each ref is handed over as, futures of the decoders' results): a remote ref's bytes
        (read here, ahead) or its rejection, a local ref's path (read by the decoder)."""
        read: dict = {}
        pending: collections.deque = collections.deque()
        for index, ref in enumerate(batch):
            if self._storage.for_path(ref.path).remote:
                pending.append((index, ref, self._start_read(ref.path)))
                if len(pending) > READ_AHEAD:
                    earliest, earliest_ref, attempt = pending.popleft()
                    read[earliest] = self._read_data(earliest_ref, attempt)
        for index, ref, attempt in pending:
            read[index] = self._read_data(ref, attempt)
        entries = [read.get(index, ref.path) for index, ref in enumerate(batch)]
        assert self._pixel_work is not None  # handed over only when the DoFn has decoders (setup)
        return batch, entries, self._pixel_work.submit(
            [entry for entry in entries if not isinstance(entry, beam.pvalue.TaggedOutput)])

    def _finished(self, batch, entries, futures):
        """The outputs of a batch handed over by ``_started``, in its order."""
        results = (result for future in futures for result in future.result())
        outputs = []
        for ref, entry in zip(batch, entries):
            if isinstance(entry, beam.pvalue.TaggedOutput):  # a remote read was rejected
                outputs.append(entry)
                continue
            result = next(results)
            if isinstance(result, decoder_pool.FailedRead):  # retried (or quarantined) here, counted by Beam
                outputs.append(self._decoded(ref, _raising(result.error)))
            else:
                outputs.append(self._output(ref, *result))
        return outputs

    def _start_read(self, path):
        """A callable that makes the first attempt at reading ``path``, begun now where it pays (its storage
        requests are counted when it is called, on the DoFn's thread)."""
        storage = self._storage.for_path(path)
        if storage.remote:
            assert self._pool is not None  # made in setup
            return retries.counted_submit(self._pool, self._read, path)
        storage.will_read(path)
        return lambda: self._read(path)

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

    def _output(self, ref, size, image):
        """The output of ``ref``, read as ``size`` bytes, on the DoFn's thread, where its counters are kept."""
        self.bytes_read.inc(size)
        self.source_bytes.update(size)
        if isinstance(image, image_ops.ImageRejected):
            return self._reject(ref, image.reason, image.message, size)
        jpeg, notes, sha256 = image
        self.decoded.inc()
        height, width = self._options.image_size
        return EncodedImage(ref=ref, sha256=sha256, jpeg=jpeg, height=height, width=width,
                            source_bytes=size, decisions=image_ops.decisions(notes),
                            perceptual_hash=notes.get('perceptual_hash'), source_width=notes['source_width'],
                            source_height=notes['source_height'], upscaled=notes['upscaled'],
                            encoded_sha256=hashlib.sha256(jpeg).hexdigest() if self._with_digest else None)


def _split(outputs):
    """A batch's outputs as they leave: each rejected image alone, then its EncodedImages as one list (none
    when every image was rejected)."""
    rejected = [output for output in outputs if isinstance(output, beam.pvalue.TaggedOutput)]
    yield from rejected
    if len(rejected) < len(outputs):
        yield [output for output in outputs if not isinstance(output, beam.pvalue.TaggedOutput)]


def _raising(error):
    """The first attempt of a read that failed on a decoder: it raises that read's error again."""
    def attempt():
        raise error
    return attempt


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
    first reads fail. ``with_hash``: also the perceptual hash of each decoded image; ``with_digest``: the sha256
    of each JPEG written (``EncodedImage.encoded_sha256``).
    ``decoders``: threads that do the pixel work (``imgrec.imaging.decoder_pool``; 0: the DoFn's own thread
    does it).
    """

    def __init__(self, options, storage, *, read=None, with_hash=False, with_digest=False, decoders=0):
        super().__init__()
        self._fn = _DecodeResizeEncodeFn(options, read or _ReadOnce(storage), storage, with_hash, with_digest,
                                         decoders)

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
