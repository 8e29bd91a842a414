"""Near-duplicate candidates: pairs of images one of whose perceptual hashes (``imgrec.imaging.perceptual_hash``:
the whole image's and its centre's) are within the threshold, found without comparing every pair.

Each of an image's hashes is cut into threshold + 1 bands; two hashes within the threshold agree exactly
on one of them (pigeonhole). Each record is keyed by its (hash, band, value) triples, and only the members of
one key meet on a worker, where every pair is compared at once (vectorised); a pair is kept from the first
hash and band it shares only. A member is numbers only, packed in 40 bytes: its hashes, a number for its name
(the order a bucket's members are taken in) and where its frame is (``Frame``: the frame file's number in the
build's table of them, ``Hashed.files``). A worker holds every key's members of a bundle at once (a lifted
combine gathers them), so this is what the candidates' memory is made of; copies of one picture (identical
hashes) are kept once in every bucket but the first band of the first hash, where they are linked. A candidate
leaves with both its images' frames, keyed by the first one's file, so ``imgrec.transforms.near_duplicate_confirm``
reads its pictures with no join to the records; it is packed in 40 bytes too (``packed_candidate``), and a file's
candidates are gathered into one byte string on the way (``Concatenated``).
"""
import bisect
import functools
import struct
import typing

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.hashing import stable_hash
from imgrec.imaging import perceptual_hash as ph

_MASK = (1 << ph.BITS) - 1
# A bucket member's numbers (``band_keys``): its hashes, its member id, its frame's offset, and its frame file's
# number and frame length in one (32 bits each).
MEMBER = np.dtype('<i8')
MEMBER_FIELDS = ph.HASHES + 3
_MEMBER_SALT = 'near-duplicate member'
# BandKeys' output of the first band of the first hash: every member, for the copies of a picture to be linked.
STARS = 'stars'


def _signed(value):
    """An unsigned 64-bit value as a signed one: what Beam's integer coder and the packed members (``MEMBER``) take."""
    return value - (1 << ph.BITS) if value >> (ph.BITS - 1) else value


def member_id(source):
    """A source's number in the band buckets: a stable 64-bit hash of its name, signed as Beam's integer coder
    wants it: the order a bucket's members are taken in (so which of several copies a star starts from does not
    depend on where their frames are). Two names with one number (about one chance in 10^7 among a million)
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
    """The Candidates of concatenated ``packed_candidate`` bytes, sorted (the order they are packed in varies)."""
    return sorted(Candidate(Frame.unpacked(*numbers[0:2]), Frame.unpacked(*numbers[2:4]), numbers[4])
                  for numbers in CANDIDATE.iter_unpack(packed))


class Hashed(typing.NamedTuple):
    """What the band buckets need to know of all the hashed records at once (``SurveyHashed``): how many there
    are (the threshold follows from it: ``perceptual_hash.threshold_for``) and the sorted paths of the files
    their frames are in (a few hundred spill files, or a previous version's shards): a member names its file
    by its number in ``files`` (4 bytes, not a path), and the confirmation reads it back."""
    images: int
    files: tuple


class _HashedFn(beam.CombineFn):
    """Records -> (how many are hashed, the set of their frame files): one small accumulator a bundle."""

    def create_accumulator(self):
        return 0, set()

    def add_input(self, accumulator, record):
        count, files = accumulator
        if record.perceptual_hash is None:
            return accumulator
        if record.payload_file:
            files.add(record.payload_file)
        return count + 1, files

    def merge_accumulators(self, accumulators):
        counts, sets = zip(*accumulators)
        return sum(counts), set().union(*sets)

    def extract_output(self, accumulator):
        count, files = accumulator
        return Hashed(count, tuple(sorted(files)))


class SurveyHashed(beam.PTransform):
    """RecordRef -> one Hashed."""

    def expand(self, records):
        surveyed = (records
                    | 'Keyed' >> beam.Map(lambda record: (None, record))
                    | 'Survey' >> beam.CombinePerKey(_HashedFn()))
        # Read as a side input by one element: a CombineGlobally costs five steps more than this.
        return (records.pipeline
                | 'Once' >> beam.Impulse()
                | 'Hashed' >> beam.Map(lambda _, found: found.get(None, Hashed(0, ())), beam.pvalue.AsDict(surveyed)))


def band_keys(record, threshold, hashed):
    """((hash, band, value), member) for each band of each of the record's hashes
    (``perceptual_hash.HASHES``: the whole image's, the centre's); none without hashes or without a frame
    (nothing to confirm it by). A member is the record's hashes, member id and frame (its file's number in
    ``hashed.files``, a ``Hashed``) packed as little-endian 64-bit ints (``MEMBER``): 40 bytes, which is what a
    bucket holds in memory too (``_MembersFn``), where a tuple of Python ints takes ~200."""
    if record.perceptual_hash is None or not record.payload_file:
        return
    values = ph.from_hex(record.perceptual_hash)
    file = bisect.bisect_left(hashed.files, record.payload_file)
    frame = Frame(file, record.payload_offset, record.payload_length)
    member = np.array([*map(_signed, values), member_id(record.source), *frame.packed()], dtype=MEMBER).tobytes()
    edges = ph.band_edges(ph.bands_for(threshold))
    for index, value in enumerate(values):
        for band, band_value in enumerate(ph.band_values(value, edges)):
            yield (index, band, band_value), member


def _band_outputs(record, threshold, hashed):
    """``band_keys``, those of the first band of the first hash (where copies of one picture are linked) to
    STARS, the others to the main output (where a picture's copies are compared once)."""
    for keyed in band_keys(record, threshold, hashed):
        (index, band, _), _ = keyed
        yield beam.pvalue.TaggedOutput(STARS, keyed) if index == 0 and band == 0 else keyed


def unpacked(members):
    """The (hashes, (member id, Frame)) of packed members (``band_keys``), as Python ints."""
    rows = np.frombuffer(members, dtype=MEMBER).reshape(-1, MEMBER_FIELDS)
    return [(tuple(row[:ph.HASHES]), (row[-3], Frame.unpacked(*row[-2:]))) for row in rows.tolist()]


@functools.cache
def _earlier_bands(threshold):
    """For each band, the bit masks of the bands before it (bits counted from the most significant)."""
    masks = [((1 << (stop - start)) - 1) << (ph.BITS - stop) for start, stop in ph.band_edges(ph.bands_for(threshold))]
    return tuple(tuple(masks[:band]) for band in range(len(masks)))


def _hashes(values):
    """A member's hashes as a tuple of unsigned ints (one hash may be given as an int)."""
    return tuple(value & _MASK for value in ((values,) if isinstance(values, int) else values))


def pairs_in_bucket(band, members, threshold, index=0):
    """(source, source, distance) candidates among the (hashes, source) ``members`` of one value of band
    ``band`` of hash ``index``: pairs within ``threshold`` on that hash whose first shared band is ``band``
    and which no earlier hash has within the threshold (so each pair is found once, in one bucket), the
    smaller source first; ``distance`` is the smallest of the pair's hash distances. Two members share this
    band; it is their first if every earlier band has a bit that differs (masks, not the band values of
    both hashes: this test runs for every pair within the threshold in every band). ``hashes``: a tuple,
    one int a hash, or one int for the first hash alone."""
    earlier = _earlier_bands(threshold)[band]
    members = sorted(((_hashes(values), source) for values, source in members), key=lambda member: member[1])
    first_of: dict[tuple, tuple] = {}
    distinct = []

    def found_before(a, b):
        return any(ph.distance(x, y) <= threshold for x, y in zip(a[:index], b[:index]))

    for values, source in members:
        first = first_of.setdefault(values, (values, source))
        if first[1] != source:
            # members with all their hashes identical (copies of one picture, as a rule) share every band: a
            # candidate of the first of them, once; one hash alike is not enough (smooth pictures' centres
            # often hash alike), so those are compared pair by pair
            if band == 0 and not found_before(first[0], values):
                yield first[1], source, ph.nearest_distance(first[0], values)
        else:
            distinct.append((values, source))
    if len(distinct) < 2:
        return
    for i, j, _ in ph.pairs_within([values[index] for values, _ in distinct], threshold):
        (a, source_a), (b, source_b) = distinct[i], distinct[j]
        differ = a[index] ^ b[index]
        if all(differ & mask for mask in earlier) and not found_before(a, b):
            yield source_a, source_b, ph.nearest_distance(a, b)


def first_of_each_picture(members):
    """Packed members (``band_keys``) with those whose hashes are all identical (copies of one picture) kept once:
    the one a bucket takes first (``pairs_in_bucket``: the smallest member id, then frame), which is all that
    bucket compares of them unless it is the first band of the first hash, where the copies are linked to it."""
    rows = np.frombuffer(members, dtype=MEMBER).reshape(-1, MEMBER_FIELDS)
    if len(rows) < 2:
        return bytes(members)
    hashes, ids, offsets, file_lengths = rows[:, :ph.HASHES], rows[:, -3], rows[:, -2], rows[:, -1]
    order = np.lexsort((file_lengths & 0xFFFFFFFF, offsets, file_lengths >> 32, ids, *hashes.T[::-1]))
    ordered = hashes[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return rows[order[first]].tobytes()


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


class _MembersFn(Concatenated):
    """The packed members of one band value (``band_keys``), concatenated. A worker holds every key's members of
    a bundle at once, so how small a member is decides the candidates' peak memory. With ``copies_once``, copies
    of one picture are kept once (``first_of_each_picture``) as members are added (each time their number
    doubles past COMPACT_FROM) and before they leave: a collection saved many times over then puts each picture
    through every band but one once, not once a copy."""

    COMPACT_FROM = 1024

    def __init__(self, copies_once):
        self._copies_once = copies_once

    def add_input(self, accumulator, packed):
        accumulator = super().add_input(accumulator, packed)
        count = len(accumulator) // len(packed)
        if self._copies_once and count >= self.COMPACT_FROM and count & (count - 1) == 0:
            accumulator[:] = first_of_each_picture(accumulator)
        return accumulator

    def extract_output(self, accumulator):
        return first_of_each_picture(accumulator) if self._copies_once else bytes(accumulator)


class _CandidatesFn(beam.DoFn):
    """One band bucket -> its candidates (the first's frame file, ``packed_candidate``): pairs within the threshold
    found in this bucket first (``pairs_in_bucket``). Counts the comparisons, the cost that grows with the
    square."""

    def __init__(self):
        self.compared = Metrics.counter(*counters.HASHES_COMPARED)

    def process(self, keyed, threshold):
        (index, band, _), packed = keyed
        members = unpacked(packed)
        self.compared.inc(len(members) * (len(members) - 1) // 2)
        for (_, first), (_, second), distance in pairs_in_bucket(band, members, threshold, index):
            yield first.file, packed_candidate((first, second, distance))


class FindCandidates(beam.PTransform):
    """RecordRef -> (the first's frame file number, ``packed_candidate``) for every pair within ``threshold`` on
    one of their hashes, once: ``threshold`` a number, or a side input of it; ``hashed``: the side input of the
    records' ``Hashed``."""

    def __init__(self, threshold, hashed):
        super().__init__()
        self._threshold = threshold
        self._hashed = hashed

    def expand(self, records):
        # Beam would infer the tagged output into the main output's type: both are ((hash, band, value), member).
        keyed = records | 'BandKeys' >> beam.FlatMap(_band_outputs, self._threshold, self._hashed).with_output_types(
            typing.Tuple[typing.Tuple[int, int, int], bytes]).with_outputs(STARS, main='bands')
        return ((keyed[STARS] | 'GroupFirstBand' >> beam.CombinePerKey(_MembersFn(copies_once=False)),
                 keyed.bands | 'GroupBands' >> beam.CombinePerKey(_MembersFn(copies_once=True)))
                | 'AllBands' >> beam.Flatten()
                | 'CompareInBand' >> beam.ParDo(_CandidatesFn(), self._threshold))
