"""The pixel work of images on decode threads, handed over in chunks, results in order.

A local in_memory build runs every Beam stage on one thread. Pillow, hashlib and numpy let go of Python's
lock for most of the pixel work (read, sha256, decode, resize, encode, perceptual hash), so threads of
its own use the other cores while the Beam thread goes on. Work crosses in chunks of ``CHUNK`` images:
one future to wait for, and one switch of threads, a chunk rather than an image.

Spawned processes instead of threads were built and measured (docs/benchmarks.md): no faster, with more
CPU and memory; the Beam thread's own work, not the pixel work, bounds the stage. So threads, which cost
nothing to start.
"""
import concurrent.futures
import hashlib
import typing

from imgrec.imaging import image_ops

CHUNK = 10


class FailedRead(typing.NamedTuple):
    """A first read that failed on a decoder: ``error`` is its error, judged where the retries are counted."""
    error: BaseException


def encoded(data, options, with_hash=False):
    """(jpeg, notes, sha256 hex) of ``data`` under ``options`` (a RecordOptions), or its ImageRejected: the
    same function on any thread, so the bytes are too. The sha256 is taken first, as the bytes come in."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        jpeg, notes = image_ops.decode_resize_encode(data, options, with_hash=with_hash)
    except image_ops.ImageRejected as rejection:
        return rejection
    return jpeg, notes, digest


class DecoderPool:
    """``count`` decode threads that turn chunks of entries (a path, read there by ``read``, or bytes already
    read) into ``(source size, encoded(...))`` or FailedRead each, in order."""

    def __init__(self, count, options, with_hash, read):
        self._work = options, with_hash, read
        self._executor = concurrent.futures.ThreadPoolExecutor(count, thread_name_prefix='decode')

    def submit(self, entries):
        """Futures of the results of ``entries``, a chunk a future, in order."""
        return [self._executor.submit(self._chunk, entries[start:start + CHUNK])
                for start in range(0, len(entries), CHUNK)]

    def shutdown(self):
        self._executor.shutdown(cancel_futures=True)

    def _chunk(self, entries):
        options, with_hash, read = self._work
        results: list[FailedRead | tuple[int, typing.Any]] = []
        for entry in entries:
            if isinstance(entry, bytes):
                data = entry
            else:
                try:
                    data = read(entry)
                except Exception as error:  # pylint: disable=broad-except  # judged by retries, where Beam counts
                    results.append(FailedRead(error))
                    continue
            results.append((len(data), encoded(data, options, with_hash)))
        return results
