"""Near-duplicate confirmation: a candidate is a link only if the two images' own pixels agree
(``imgrec.imaging.picture_check``), read back from the records as written.

A candidate's two member ids are joined to where their records are (``Located``: the source and its frame
reference, the spill file or the previous version's shard), one shuffle an end, and the candidates whose
first record is in one frame file meet on a worker, which reads both frames of each (ranged reads,
coalesced by ``imgrec.storage.frames``), decodes their JPEGs small and compares them. Two records whose
JPEGs are the same bytes are confirmed without decoding. No thumbnail crosses any shuffle; each worker keeps
the last ``PICTURES_KEPT`` pictures it decoded, so an image in several candidates is seldom decoded twice.
"""
import collections
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters, tfrecord
from imgrec.contract import features as F
from imgrec.contract.example import decode_example
from imgrec.imaging import picture_check
from imgrec.storage.frames import FrameReader
from imgrec.storage.storage import given_or_default
from imgrec.transforms.near_duplicate_candidates import Candidate, member_id

# Pictures (decoded for the check) a worker keeps, 40-65 kB each (records of 64 to 224 pixels), so an image in
# several candidates is seldom decoded twice; and the candidates whose frames are read at once.
PICTURES_KEPT = 1024
PAIRS_AT_ONCE = 256



class Located(typing.NamedTuple):
    """Where a hashed record is: its source and the frame (file, offset, length) its bytes are in."""
    source: str
    frame: tuple


class HalfLocated(typing.NamedTuple):
    """A candidate told to its second image: the first image located, and the hash distance."""
    first: Located
    distance: int


def located(record):
    """(member id, Located) of a hashed record: what a candidate's ids are joined to."""
    if record.perceptual_hash is not None:
        yield member_id(record.source), Located(record.source, (record.payload_file, record.payload_offset,
                                                                record.payload_length))


def jpeg_of_frame(frame_bytes):
    """The JPEG of one TFRecord frame as the build wrote it (its Example's encoded image)."""
    return decode_example(tfrecord.unframe(frame_bytes))[F.IMAGE_ENCODED]


def _jpeg_or_none(frame_bytes):
    """A frame's JPEG, or None where it cannot be had (no frame, unreadable, damaged): such a candidate is not
    confirmed (the shard writer reports a damaged frame; a heuristic does not fail the build)."""
    if frame_bytes is None or isinstance(frame_bytes, Exception):
        return None
    try:
        return jpeg_of_frame(frame_bytes)
    except Exception:  # pylint: disable=broad-except
        return None


def _split_joined(values, kind):
    """(the Located, the others of ``kind``) of one member id's joined values, told apart by type (a
    CoGroupByKey would cost three steps more)."""
    places: list[Located] = []
    others: list = []
    for value in values:
        if isinstance(value, Located):
            places.append(value)
        elif isinstance(value, kind):
            others.append(value)
    return places, others


def _tell_second(joined):
    """Each candidate of a first image, told to its second image with the first located."""
    _, values = joined
    places, candidates = _split_joined(values, Candidate)
    for place in places:
        for candidate in candidates:
            yield candidate.other, HalfLocated(place, candidate.distance)


def _located_pairs(joined):
    """Each candidate with both images located, the smaller source first, keyed by its first frame's file:
    the confirmation reads the frames of one file's candidates together."""
    _, values = joined
    places, halves = _split_joined(values, HalfLocated)
    for place in places:
        for half in halves:
            first, second = sorted((half.first, place))
            yield first.frame[0] or '', (first, second, half.distance)


class _ConfirmFn(beam.DoFn):
    """Candidates (Located, Located, distance) -> links (source, source, distance, similarity): those whose
    pictures agree (``picture_check.judge``), read by reference, ``PAIRS_AT_ONCE`` candidates' frames in one
    coalesced read; two records whose JPEGs are the same bytes (pixel-identical sources: the encoder is
    deterministic) are confirmed without decoding. Counts the candidates confirmed and refused."""

    def __init__(self, storage=None):
        self._storage = storage
        self.confirmed = Metrics.counter(*counters.PAIRS_CONFIRMED)
        self.refused = Metrics.counter(*counters.PAIRS_REFUSED)

    def setup(self):
        self._pictures = collections.OrderedDict()  # source -> Picture (or None), the last PICTURES_KEPT
        self._reader = None

    def teardown(self):
        if self._reader is not None:
            self._reader.close()

    def _jpegs_of(self, frames):
        """{source: JPEG bytes or None} of {source: frame reference}: one coalesced read of the frames."""
        if self._reader is None:
            first = next((ref[0] for ref in frames.values() if ref[0] is not None), None)
            if first is None:
                return dict.fromkeys(frames)
            self._reader = FrameReader(given_or_default(first, self._storage))
        read = self._reader.read([ref for ref in set(frames.values()) if ref[0] is not None], failures=True)
        return {source: _jpeg_or_none(read.get(ref)) for source, ref in frames.items()}

    def _picture(self, source, jpeg):
        """The Picture of ``source``, kept or decoded from ``jpeg`` (None when it cannot be decoded)."""
        if source in self._pictures:
            self._pictures.move_to_end(source)
            return self._pictures[source]
        try:
            picture = picture_check.from_jpeg(jpeg) if jpeg is not None else None
        except Exception:  # pylint: disable=broad-except  # an undecodable record confirms nothing
            picture = None
        self._pictures[source] = picture
        if len(self._pictures) > PICTURES_KEPT:
            self._pictures.popitem(last=False)
        return picture

    def process(self, keyed):
        _, candidates = keyed
        candidates = sorted(candidates)
        confirmed = 0
        for start in range(0, len(candidates), PAIRS_AT_ONCE):  # the frames of a slice of candidates read at once
            chunk = candidates[start:start + PAIRS_AT_ONCE]
            jpegs = self._jpegs_of({place.source: tuple(place.frame) for pair in chunk for place in pair[:2]})
            for first, second, distance in chunk:
                a, b = first.source, second.source
                if jpegs[a] is None or jpegs[b] is None:
                    continue
                if jpegs[a] == jpegs[b]:  # the same pixels written: the same picture, nothing to decode
                    same, similarity = True, 1.0
                else:
                    picture_a, picture_b = self._picture(a, jpegs[a]), self._picture(b, jpegs[b])
                    if picture_a is None or picture_b is None:
                        continue
                    same, similarity = picture_check.judge(picture_a, picture_b)
                if same:
                    confirmed += 1
                    yield a, b, distance, similarity
        self.confirmed.inc(confirmed)
        self.refused.inc(len(candidates) - confirmed)


class ConfirmCandidates(beam.PTransform):
    """{'records': RecordRef, 'candidates': (member id, Candidate)} -> links (source, source, distance,
    similarity), the smaller source first. ``storage``: the storage the records' frames are read through
    (the job's, with its options), or the default for the path."""

    def __init__(self, storage=None):
        super().__init__()
        self._storage = storage

    def expand(self, inputs):
        places = inputs['records'] | 'Locate' >> beam.FlatMap(located)
        halves = ((places, inputs['candidates'])
                  | 'WithFirst' >> beam.Flatten()
                  | 'JoinFirst' >> beam.GroupByKey()
                  | 'TellSecond' >> beam.FlatMap(_tell_second))
        return ((places, halves)
                | 'WithSecond' >> beam.Flatten()
                | 'JoinSecond' >> beam.GroupByKey()
                | 'ByFrameFile' >> beam.FlatMap(_located_pairs)
                | 'FramesTogether' >> beam.GroupByKey()
                | 'Confirm' >> beam.ParDo(_ConfirmFn(self._storage)))
