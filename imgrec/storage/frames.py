"""Reads TFRecord frames by reference (file, offset, length): coalesced, parallel ranged reads.

A shard writer needs a few thousand frames scattered over many spill files (or, on a refresh, over the
previous version's shards). Frames of one file that lie close together are fetched by one read, and
the reads of a window run on several threads, so writing a ``gs://`` shard costs a round trip per
group of nearby frames, not one per record, and the latency of those round trips overlaps.
"""
from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Sequence

from imgrec.storage import retries
from imgrec.storage.storage import Storage

Ref = tuple[str, int, int]  # (file, offset, length)
Read = tuple[str, int, int, list[Ref]]  # (file, start, end, the refs in it)

# Frames of one remote object closer than this are fetched by one read (the gap is read and dropped): a
# round trip costs more than a few hundred kB. Local reads cost a system call: only touching frames merge.
GCS_COALESCE_GAP = 256 * 1024
# No single read larger than this.
MAX_READ = 4 * 1024 * 1024
THREADS = 8


def _touching(file: str) -> int:
    return 0


def plan_reads(refs: Iterable[Ref], gap_of: Callable[[str], int] = _touching, max_read: int = MAX_READ) -> list[Read]:
    """Groups (file, offset, length) refs into reads: [(file, start, end, [refs in it])], sorted; frames of one
    file at most ``gap_of(file)`` bytes apart share a read (by default only touching ones)."""
    reads: list[Read] = []
    for ref in sorted(set(refs)):
        file, offset, length = ref
        last = reads[-1] if reads else None
        if (last is not None and last[0] == file and offset - last[2] <= gap_of(file)
                and offset + length - last[1] <= max_read):
            reads[-1] = (file, last[1], max(last[2], offset + length), last[3] + [ref])
        else:
            reads.append((file, offset, offset + length, [ref]))
    return reads


class FrameReader:
    """Fetches frames from the files of ``storage``, retrying transient errors under its policy."""

    def __init__(self, storage: Storage, threads: int = THREADS):
        self._storage = storage
        self._threads = threads
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def _gap(self, file: str) -> int:
        return GCS_COALESCE_GAP if self._storage.remote else 0

    def read(self, refs: Sequence[Ref], failures: bool = False) -> dict[Ref, bytes | Exception]:
        """{(file, offset, length): frame bytes} for every ref.

        With ``failures``, a ref whose bytes cannot be had (its file is missing or forbidden, or ends before
        it) maps to that exception instead of raising it, and a read of several frames that fails so is
        tried again a frame at a time, so only the frames it cannot reach fail: a refresh decodes those
        images again (``imgrec.transforms.previous.ReuseCheck``). A transient error past the deadline still raises.
        """
        reads = plan_reads(refs, self._gap)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self._threads)
        frames: dict[Ref, bytes | Exception] = {}
        for fetched in retries.counted_map(self._pool, lambda r: self._fetch(r, failures), reads):
            frames.update(fetched)
        return frames

    def _fetch(self, read: Read, failures: bool) -> dict[Ref, bytes | Exception]:
        """{ref: bytes (or, with ``failures``, the exception)} of one planned read."""
        file, start, end, members = read
        try:
            data = self._storage.read_range(file, start, end)
        except retries.RetriesExhausted:
            raise
        except Exception as error:  # pylint: disable=broad-except  # with failures: whatever kept the bytes away
            if not failures:
                raise
            if len(members) == 1:
                return {members[0]: error}
            fetched: dict[Ref, bytes | Exception] = {}
            for ref in members:
                fetched.update(self._fetch((file, ref[1], ref[1] + ref[2], [ref]), failures))
            return fetched
        return {ref: data[ref[1] - start:ref[1] - start + ref[2]] for ref in members}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
