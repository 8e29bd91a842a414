"""The pixel work of images in processes of their own, handed over in chunks.

A local in_memory build runs every Beam stage on one thread, under one Python lock: threads decode only
while Pillow lets the lock go, and Beam's own work waits for them meanwhile. Processes take the whole
pixel work (read, sha256, decode, resize, encode, perceptual hash) off that thread. A process holds
Pillow, numpy and the reader, never Beam; it is spawned, not forked, as the runner's threads may hold locks.
Work crosses in chunks (``CHUNK`` images): a task costs the sending process about 0.23 ms of its own CPU,
a chunk of ten 0.03 ms an image (measured with 10 kB results).
"""
import concurrent.futures
import functools
import hashlib
import multiprocessing
import pickle
import typing

from imgrec_imaging import image_ops

CHUNK = 10

# What a decoding process works with, set once as it starts (``_start``).
_work = None


class FailedRead(typing.NamedTuple):
    """A first read that failed where it was made: ``error`` is its error (None when it could not cross
    processes: the read is then made again, as a first attempt)."""
    error: BaseException | None


def encoded(data, options, with_hash=False):
    """(jpeg, notes, sha256 hex) of ``data`` under ``options`` (a RecordOptions), or its ImageRejected: the
    same function on any thread or process, so the bytes are too. The sha256 is taken first, as the bytes come in."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        jpeg, notes = image_ops.decode_resize_encode(data, options, with_hash=with_hash)
    except image_ops.ImageRejected as rejection:
        return rejection
    return jpeg, notes, digest


class ReadOnce:
    """One attempt at reading a path, through the storage of its scheme: a reader that crosses processes
    without taking Beam with it."""

    def __init__(self, storage):
        self._storage = storage

    def __call__(self, path):
        return self._storage.for_path(path).read_once(path)


class DecoderPool:
    """``count`` decoders (threads, or ``processes``) that turn chunks of entries (a path, read there by
    ``read``, or bytes already read) into ``(source size, encoded(...))`` or FailedRead each, in order."""

    def __init__(self, count, options, with_hash, read, processes=False):
        work = options, with_hash, read
        if processes:
            self._executor = concurrent.futures.ProcessPoolExecutor(
                count, mp_context=multiprocessing.get_context('spawn'), initializer=_start, initargs=work)
            self._chunk = _chunk
        else:
            self._executor = concurrent.futures.ThreadPoolExecutor(count, thread_name_prefix='decode')
            self._chunk = functools.partial(_chunk, work=work)

    def submit(self, entries):
        """Futures of the results of ``entries``, a chunk a future, in order."""
        return [self._executor.submit(self._chunk, entries[start:start + CHUNK])
                for start in range(0, len(entries), CHUNK)]

    def shutdown(self):
        self._executor.shutdown(cancel_futures=True)


def _start(*work):
    global _work  # pylint: disable=global-statement  # a process's one build
    _work = work


def _chunk(entries, work=None):
    options, with_hash, read = work or _work
    results = []
    for entry in entries:
        if isinstance(entry, bytes):
            data = entry
        else:
            try:
                data = read(entry)
            except Exception as error:  # pylint: disable=broad-except  # judged by retries, where Beam counts
                results.append(FailedRead(_portable(error)))
                continue
        results.append((len(data), encoded(data, options, with_hash)))
    return results


def _portable(error):
    """``error`` if it survives pickling (most OSErrors do), else None."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # pylint: disable=broad-except  # any failure to cross
        return None
    return error
