"""Near-duplicate candidates of the perceptual check (``--near_duplicate_check perceptual``): pairs of images to
compare by their pixels, found from their perceptual hashes (``imgrec.imaging.perceptual_hash``: the whole image's
and its centre's) without a pixel check per pair of a class. (The exact check, the default, needs no candidates:
``imgrec.transforms.same_pictures``.)

Each image proposes its ``NEIGHBOURS`` nearest within ``perceptual_hash.MAX_THRESHOLD``
(``imgrec.imaging.hash_neighbours``), and a pair either image proposes is a candidate for the pixel check. The
hashes are gathered into one byte string (40 bytes an image) read by every worker as a side input, and the rows are
cut into tasks of ``TASK_ROWS`` images, each comparing its rows with every hash: the popcounts grow with the square
of the images (~6 ns a pair: 2-3 s of one core at 20,000), the pixel checks with the images times ``NEIGHBOURS``.

A member is numbers only, packed in 40 bytes (``MEMBER``): its hashes, a number for its name (the order ties are
broken in) and where its frame is (``Frame``: the frame file's number in the build's table of them,
``Hashed.files``). A candidate leaves with both its images' frames, keyed by the first one's file, so the
confirmation reads its pictures with no join to the records; it is packed in 40 bytes too (``packed_candidate``).
"""
import bisect
import math
import struct
import typing

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.hashing import stable_hash
from imgrec.contract.metadata import NEAR_DUPLICATE_CHECKS as CHECKS
from imgrec.imaging import hash_neighbours, perceptual_hash as ph

# A member's numbers (``packed_member``): its hashes, its member id, its frame's offset, and its frame file's
# number and frame length in one (32 bits each).
MEMBER = np.dtype('<i8')
MEMBER_FIELDS = ph.HASHES + 3
_MEMBER_SALT = 'near-duplicate member'
# The checks (``--near_duplicate_check``): the same picture written (exact) or the pixel check (perceptual).
EXACT, PERCEPTUAL = CHECKS
# Each image's nearest proposed for the pixel check (``hash_neighbours``), and the images a task compares with all.
NEIGHBOURS = 4
TASK_ROWS = 4096


def _signed(value):
    """An unsigned 64-bit value as a signed one: what Beam's integer coder and the packed members (``MEMBER``) take."""
    return value - (1 << ph.BITS) if value >> (ph.BITS - 1) else value


def member_id(source):
    """A source's number among the candidates: a stable 64-bit hash of its name, signed as Beam's integer coder
    wants it: the order members are taken in and ties broken by (so which of several copies a star starts from
    does not depend on where their frames are). Two names with one number (about one chance in 10^7 among a million)
    leave their order to their frames."""
    return _signed(stable_hash(_MEMBER_SALT, source))


class Frame(typing.NamedTuple):
    """Where a hashed record's TFRecord frame is: its file's number in the build's table of frame files
    (``Hashed.files``: spill files, or a previous version's shards), its offset and its length."""
    file: int
    offset: int
    length: int

    def packed(self):
        """(offset, file number and length in one int: 32 bits each), as members and candidates hold a frame."""
        return self.offset, self.file << 32 | self.length

    @classmethod
    def unpacked(cls, offset, file_and_length):
        """The Frame of ``packed``'s two numbers."""
        return cls(file_and_length >> 32, offset, file_and_length & 0xFFFFFFFF)


class Candidate(typing.NamedTuple):
    """A pair within the threshold on one of its hashes: both images' frames (the first the smaller member id),
    and the hash distance."""
    first: Frame
    second: Frame
    distance: int


# A candidate on its way to its confirmation (``packed_candidate``): each frame's offset, then its file's number and
# length in one (32 bits each), as in a member; then the distance. 40 bytes, where a Candidate of two Frames takes
# ~300 as Python objects, and the confirmation holds a frame file's candidates at once.
CANDIDATE = struct.Struct('<5q')


def packed_candidate(candidate):
    """A Candidate as CANDIDATE's bytes."""
    first, second, distance = candidate
    return CANDIDATE.pack(*first.packed(), *second.packed(), distance)


def unpacked_candidates(packed):
    """The Candidates of concatenated ``packed_candidate`` bytes, each once (both images may propose a pair), sorted
    (the order they are packed in varies)."""
    return sorted({Candidate(Frame.unpacked(*numbers[0:2]), Frame.unpacked(*numbers[2:4]), numbers[4])
                   for numbers in CANDIDATE.iter_unpack(packed)})


class Hashed(typing.NamedTuple):
    """What the perceptual check's candidates need to know of all the hashed records at once (``SurveyHashed``):
    the sorted paths of the files their frames are in (a few hundred spill files, or a previous version's shards):
    a member names its file by its number in ``files`` (4 bytes, not a path), and the confirmation reads it back."""
    files: tuple


class _HashedFn(beam.CombineFn):
    """Records -> the set of the hashed ones' frame files: one small accumulator a bundle."""

    def create_accumulator(self):
        return set()

    def add_input(self, files, record):
        if record.perceptual_hash is not None and record.payload_file:
            files.add(record.payload_file)
        return files

    def merge_accumulators(self, accumulators):
        return set().union(*accumulators)

    def extract_output(self, files):
        return Hashed(tuple(sorted(files)))


class SurveyHashed(beam.PTransform):
    """RecordRef -> one Hashed."""

    def expand(self, records):
        surveyed = (records
                    | 'Keyed' >> beam.Map(lambda record: (None, record))
                    | 'Survey' >> beam.CombinePerKey(_HashedFn()))
        # Read as a side input by one element: a CombineGlobally costs five steps more than this.
        return (records.pipeline
                | 'Once' >> beam.Impulse()
                | 'Hashed' >> beam.Map(lambda _, found: found.get(None, Hashed(())), beam.pvalue.AsDict(surveyed)))


def packed_member(record, hashed):
    """A hashed record's member (``MEMBER``): its hashes, member id and frame (its file's number in ``hashed.files``,
    a ``Hashed``) as little-endian 64-bit ints, 40 bytes, where a tuple of Python ints takes ~200; None without
    hashes or without a frame (nothing to confirm it by)."""
    if record.perceptual_hash is None or not record.payload_file:
        return None
    values = ph.from_hex(record.perceptual_hash)
    file = bisect.bisect_left(hashed.files, record.payload_file)
    frame = Frame(file, record.payload_offset, record.payload_length)
    return np.array([*map(_signed, values), member_id(record.source), *frame.packed()], dtype=MEMBER).tobytes()


def _rows(members):
    return np.frombuffer(members, dtype=MEMBER).reshape(-1, MEMBER_FIELDS)


def in_member_order(members):
    """Packed members sorted by member id, then frame: the order that breaks ties between equally near images, the
    same whatever order they arrived in."""
    rows = _rows(members)
    return rows[np.lexsort((rows[:, -1], rows[:, -2], rows[:, -3]))].tobytes()


def unpacked(members):
    """The (hashes, (member id, Frame)) of packed members (``packed_member``), as Python ints."""
    rows = _rows(members)
    return [(tuple(row[:ph.HASHES]), (row[-3], Frame.unpacked(*row[-2:]))) for row in rows.tolist()]


class Concatenated(beam.CombineFn):
    """Byte strings of one key, concatenated (in no set order): packed numbers gathered on each worker before the
    shuffle and given as one byte string, where a list of their Python objects would take several times the
    memory."""

    def create_accumulator(self):
        return bytearray()

    def add_input(self, accumulator, packed):
        accumulator += packed
        return accumulator

    def merge_accumulators(self, accumulators):
        merged = bytearray()
        for accumulator in accumulators:
            merged += accumulator
        return merged

    def extract_output(self, accumulator):
        return bytes(accumulator)


class _MembersInOrder(Concatenated):
    """Packed members, concatenated, then sorted (``in_member_order``)."""

    def extract_output(self, accumulator):
        return in_member_order(bytes(accumulator))


def _members(record, hashed):
    member = packed_member(record, hashed)
    if member is not None:
        yield None, member


def _tasks(members):
    """The numbers of the tasks that cover the members' rows, TASK_ROWS each."""
    return range(math.ceil(len(_rows(members)) / TASK_ROWS))


class _NearestFn(beam.DoFn):
    """A task's number -> (the first's frame file, ``packed_candidate``) for each of its rows' ``neighbours``
    nearest within ``threshold`` among all the members (``hash_neighbours.nearest_of``), the smaller member id
    first. A pair both images propose comes twice, and is confirmed once (``unpacked_candidates``)."""

    def __init__(self, threshold, neighbours):
        self._threshold = threshold
        self._neighbours = neighbours
        self.compared = Metrics.counter(*counters.HASHES_COMPARED)

    def process(self, task, members):
        rows = _rows(members)
        start, stop = task * TASK_ROWS, min(len(rows), (task + 1) * TASK_ROWS)
        hashes = rows[:, :ph.HASHES].view(np.uint64)
        near = hash_neighbours.nearest_of(hashes, self._threshold, self._neighbours, start, stop)
        self.compared.inc((stop - start) * (len(rows) - 1))
        for i, j, distance in near.tolist():
            first, second = (Frame.unpacked(*rows[k, -2:].tolist()) for k in sorted((i, j)))  # rows: member order
            yield first.file, packed_candidate((first, second, distance))


class NearestHashes(beam.PTransform):
    """RecordRef -> (the first's frame file number, ``packed_candidate``) for each image's ``neighbours`` nearest
    within ``threshold`` (module docstring); ``hashed``: the side input of the records' ``Hashed``."""

    def __init__(self, hashed, threshold=ph.MAX_THRESHOLD, neighbours=NEIGHBOURS):
        super().__init__()
        self._hashed = hashed
        self._threshold = threshold
        self._neighbours = neighbours

    def expand(self, records):
        gathered = (records
                    | 'Members' >> beam.FlatMap(_members, self._hashed)
                    | 'AllMembers' >> beam.CombinePerKey(_MembersInOrder()))
        # One element, b'' when nothing is hashed: a CombineGlobally costs five steps more than this.
        members = (records.pipeline
                   | 'Once' >> beam.Impulse()
                   | 'MembersOnce' >> beam.Map(lambda _, found: found.get(None, b''), beam.pvalue.AsDict(gathered)))
        return (members
                | 'Tasks' >> beam.FlatMap(_tasks)
                | 'SpreadTasks' >> beam.Reshuffle()
                | 'Nearest' >> beam.ParDo(_NearestFn(self._threshold, self._neighbours),
                                          beam.pvalue.AsSingleton(members)))
