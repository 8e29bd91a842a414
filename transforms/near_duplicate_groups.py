"""Finds groups of near-duplicate images at any scale: the pictures a confirmed link joins, together.

Candidates: no pair of images is compared unless one of their perceptual hashes (``imgrec.imaging.
perceptual_hash``: the whole image's and its centre's, in every record) agree exactly on one of threshold + 1
bands: each record is keyed by its (hash, band, value) triples, and only the members of one key meet on a
worker, where every pair is compared at once (vectorised) against the threshold. Every pair within the
threshold on a hash shares one of its bands (pigeonhole), and is kept from the first hash and band it
shares only. The threshold follows from the number of hashed images (``perceptual_hash.threshold_for``, a
side input). Only numbers fill the buckets, (hashes, member id) packed in 24 bytes, the bulk of the check's
memory and shuffle,
and not one by one: the members of each key are gathered by a combine that Beam lifts, each worker sending
one list a key, not one element an image and band.

Confirmation: a candidate's member ids are joined to where their records are (``Located``: source and frame
reference), a shuffle of one element an image and one a candidate, and the candidates of one frame file meet
on a worker. A candidate is a link only if the two images' own pixels agree (``imgrec.imaging.
picture_check``): the JPEGs as written are read by reference (the spill file or the previous version's shard,
``payload_file``/``payload_offset``/``payload_length``), decoded small, and compared in shape (aligned for a
crop or a scale, allowing a brightness change and a caption strip) and colour; two records whose JPEGs are
the same bytes are confirmed without decoding. No thumbnail crosses any shuffle. Each worker keeps the last
``PICTURES_KEPT`` pictures it decoded, so an image in several candidates is decoded about once.

Groups: the links are joined into connected components without gathering them (label propagation:
each image takes the smallest source it hears, ``ROUNDS`` rounds, what is left unsettled joined by a
union-find on one worker), and each component meets on one worker. A component is a group, whole: the
pictures a confirmed link joins stay together, so copies of one picture are never cut apart by a false
link elsewhere (stars did that). Only a component larger than ``MAX_GROUP`` is cut (``bounded_groups``):
its links are taken strongest first (most similar, then nearest hashes) and a link that would make a
group larger than ``MAX_GROUP`` is cut; each image lists the links cut from it (``Node.cut``), and
near_duplicates.jsonl and the summary say so. A group's name is its smallest source by order key.
"""
import collections
import functools
import typing

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.hashing import order_key, stable_hash
from imgrec.contract import tfrecord, features as F
from imgrec.contract.example import decode_example
from imgrec.imaging import perceptual_hash as ph
from imgrec.imaging import picture_check
from imgrec.storage.frames import FrameReader
from imgrec.storage.storage import given_or_default
from imgrec.transforms.elements import RecordRef

# Label rounds: each is a shuffle of the links and a stage of its own; what they leave unsettled is
# joined on one worker, so fewer rounds cost a bigger (still small) gather, never a wrong group.
ROUNDS = 2
UNSETTLED = 'unsettled'
# The most images a group may hold: a larger component is cut, its weakest links first (``bounded_groups``).
# Copies of one picture are rarely more than a few dozen; a group must also fit a split's share.
MAX_GROUP = 256
# Pictures (decoded for the check) a worker keeps, ~45 kB each, so an image in several candidates is decoded
# about once; and the candidates whose frames are read at once.
PICTURES_KEPT = 1024
PAIRS_AT_ONCE = 256


class Node(typing.NamedTuple):
    """An image with at least one confirmed near-duplicate: its group, and its links."""
    group: str         # the group's name: its smallest source by order key
    nearest: str       # the image it is most like (highest similarity, then nearest hash)
    distance: int      # Hamming distance to it: the smaller of the two hashes' (perceptual_hash.nearest_distance)
    neighbours: tuple  # ((source, distance, similarity), ...), sorted: every confirmed link, kept or cut
    similarity: float | None = None  # the check's correlation with ``nearest`` (picture_check.similarity)
    cut: tuple = ()    # the sources whose links to this image were cut to bound the group's size


class Member(typing.NamedTuple):
    """An image of a near-duplicate group: its record, and its Node. A group crosses Beam as
    (its name, [Member, ...]), grouped by name (``imgrec.transforms.near_duplicates``)."""
    record: RecordRef
    node: Node


_MASK = (1 << ph.BITS) - 1
# A bucket member's numbers: its hashes, then its member id.
MEMBER = np.dtype('<i8')
_MEMBER_SALT = 'near-duplicate member'


def _signed(value):
    """An unsigned 64-bit value as a signed one: what Beam's integer coder and the packed members (``MEMBER``) take."""
    return value - (1 << ph.BITS) if value >> (ph.BITS - 1) else value


def member_id(source):
    """A source's number in the band buckets: a stable 64-bit hash of its name, signed as Beam's integer coder
    wants it. Numbers, not names or frame references, fill the buckets (the bulk of the check's memory);
    a candidate's names and frames are joined to it after (``Located``). Two names with one number (about
    one chance in 10^7 among a million) cost a few needless candidates, never a missed one."""
    return _signed(stable_hash(_MEMBER_SALT, source))


def band_keys(record, threshold):
    """((hash, band, value), member) for each band of each of the record's hashes
    (``perceptual_hash.HASHES``: the whole image's, the centre's); none without hashes. A member is the
    record's hashes and member id packed as little-endian 64-bit ints (``MEMBER``): 24 bytes, which is
    what a bucket holds in memory too (``_MembersFn``), where a tuple of Python ints takes ~150."""
    if record.perceptual_hash is None:
        return
    values = ph.from_hex(record.perceptual_hash)
    member = np.array([*map(_signed, values), member_id(record.source)], dtype=MEMBER).tobytes()
    edges = ph.band_edges(ph.bands_for(threshold))
    for index, value in enumerate(values):
        for band, band_value in enumerate(ph.band_values(value, edges)):
            yield (index, band, band_value), member


def unpacked(members):
    """The (hashes, member id) of packed members (``band_keys``), as Python ints."""
    rows = np.frombuffer(members, dtype=MEMBER).reshape(-1, ph.HASHES + 1)
    return [(tuple(row[:-1]), row[-1]) for row in rows.tolist()]


class Located(typing.NamedTuple):
    """Where a hashed record is: its source and the frame (file, offset, length) its bytes are in."""
    source: str
    frame: tuple


class Candidate(typing.NamedTuple):
    """A candidate told to one of its images (by member id): the other image's id, and the hash distance."""
    other: int
    distance: int


class HalfLocated(typing.NamedTuple):
    """A candidate told to its second image: the first image located, and the hash distance."""
    first: Located
    distance: int


def located(record):
    """(member id, Located) of a hashed record: what a candidate's ids are joined to."""
    if record.perceptual_hash is not None:
        yield member_id(record.source), Located(record.source, (record.payload_file, record.payload_offset,
                                                                record.payload_length))


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
    first_of: dict[int, tuple] = {}
    distinct = []

    def found_before(a, b):
        return any(ph.distance(x, y) <= threshold for x, y in zip(a[:index], b[:index]))

    for values, source in members:
        first = first_of.setdefault(values[index], (values, source))
        if first[1] != source:
            # identical hashes share every band: a candidate of the first of them, once
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


def bounded_groups(links, max_group=MAX_GROUP):
    """({source: group name}, {source: (sources whose links to it were cut)}) of one component: ``links``
    is {source: ((neighbour, distance, similarity), ...)}.

    A component no larger than ``max_group`` is one group. A larger one is joined again link by link,
    strongest first (similarity, then hash distance, then names), a link cut when it would join two
    groups into one of more than ``max_group``. Deterministic: it depends on the links only.
    """
    if len(links) <= max_group:
        name = min(links, key=order_key)
        return dict.fromkeys(links, name), {}
    parent, size = {source: source for source in links}, dict.fromkeys(links, 1)

    def find(source):
        while parent[source] != source:
            parent[source] = parent[parent[source]]
            source = parent[source]
        return source

    edges = sorted({(-similarity, distance, min(a, b), max(a, b))
                    for a, neighbours in links.items() for b, distance, similarity in neighbours})
    cut = collections.defaultdict(set)
    for _, _, a, b in edges:
        root_a, root_b = find(a), find(b)
        if root_a == root_b:
            continue
        if size[root_a] + size[root_b] > max_group:
            cut[a].add(b)
            cut[b].add(a)
            continue
        parent[root_b] = root_a
        size[root_a] += size[root_b]
    members = collections.defaultdict(list)
    for source in links:
        members[find(source)].append(source)
    name_of = {}
    for group in members.values():
        name = min(group, key=order_key)
        name_of.update(dict.fromkeys(group, name))
    return name_of, {source: tuple(sorted(others)) for source, others in cut.items()}


class _MembersFn(beam.CombineFn):
    """The packed members of one band value (``band_keys``), as one bytearray: gathered on each worker before
    the shuffle. A worker holds every key's members of a bundle at once, so how small a member is decides
    the check's peak memory."""

    def create_accumulator(self):
        return bytearray()

    def add_input(self, members, member):
        members += member
        return members

    def merge_accumulators(self, accumulators):
        merged = bytearray()
        for members in accumulators:
            merged += members
        return merged

    def extract_output(self, members):
        return bytes(members)


def jpeg_of_frame(frame_bytes):
    """The JPEG of one TFRecord frame as the build wrote it (its Example's encoded image)."""
    return decode_example(tfrecord.unframe(frame_bytes))[F.IMAGE_ENCODED]


def picture_of_frame(frame_bytes):
    """The check's Picture of one TFRecord frame as the build wrote it: the Example's JPEG, decoded small."""
    return picture_check.from_jpeg(jpeg_of_frame(frame_bytes))


def _jpeg_or_none(frame_bytes):
    """A frame's JPEG, or None where it cannot be had (no frame, unreadable, damaged): such a candidate is not
    confirmed (the shard writer reports a damaged frame; a heuristic does not fail the build)."""
    if frame_bytes is None or isinstance(frame_bytes, Exception):
        return None
    try:
        return jpeg_of_frame(frame_bytes)
    except Exception:  # pylint: disable=broad-except
        return None


class _CandidatesFn(beam.DoFn):
    """One band bucket -> its candidates (member id, Candidate): pairs within the threshold found in this
    bucket first (``pairs_in_bucket``). Counts the comparisons, the cost that grows with the square."""

    def __init__(self):
        self.compared = Metrics.counter(*counters.HASHES_COMPARED)

    def process(self, keyed, threshold):
        (index, band, _), packed = keyed
        members = unpacked(packed)
        self.compared.inc(len(members) * (len(members) - 1) // 2)
        for a, b, distance in pairs_in_bucket(band, members, threshold, index):
            yield a, Candidate(b, distance)


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


def _adjacent(keyed):
    """A node's first state: (label = smallest of itself and its neighbours, neighbours)."""
    node, neighbours = keyed
    neighbours = tuple(sorted(set(neighbours)))
    return node, (None, min(node, *(other for other, *_ in neighbours)), neighbours)


def _send(keyed):
    node, (_, label, neighbours) = keyed
    yield node, (True, label, neighbours)
    for other, *_ in neighbours:
        yield other, (False, label, None)


class _PropagateFn(beam.DoFn):
    """One round: a node takes the smallest label it hears; an edge whose ends disagree is unsettled."""

    def process(self, keyed):
        node, messages = keyed
        heard = []
        label = neighbours = None
        for own, value, links in messages:
            if own:
                label, neighbours = value, links
            else:
                heard.append(value)
        for other in heard:
            if other != label:
                yield beam.pvalue.TaggedOutput(UNSETTLED, (min(label, other), max(label, other)))
        yield node, (label, min([label, *heard]), neighbours)


def join_labels(pairs):
    """Union-find over label pairs: {label: the smallest label joined to it}, for labels that change."""
    parent: dict[str, str] = {}

    def find(label):
        root = label
        while parent.get(root, root) != root:
            root = parent[root]
        while label != root:
            parent[label], label = root, parent.get(label, label)
        return root

    for a, b in pairs:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)
    return {label: find(label) for label in parent if find(label) != label}


def _component(keyed, relabel):
    node, (label, _, neighbours) = keyed
    return relabel.get(label, label), (node, neighbours)


def _groups(keyed):
    """One component -> (source, Node) for each of its images (``bounded_groups``)."""
    _, nodes = keyed
    links = dict(nodes)
    name_of, cut = bounded_groups(links)
    for source, neighbours in sorted(links.items()):
        nearest, distance, similarity = min(neighbours, key=lambda link: (-link[2], link[1], link[0]))
        yield source, Node(name_of[source], nearest, distance, neighbours, similarity, cut.get(source, ()))


class Threshold(beam.PTransform):
    """RecordRef -> one element: the threshold for as many images as hold a hash."""

    def expand(self, records):
        hashed = (records
                  | 'Hashed' >> beam.FlatMap(lambda record: [(None, 1)] if record.perceptual_hash is not None else [])
                  | 'CountHashed' >> beam.CombinePerKey(sum))
        # The count read as a side input by one element: Count.Globally costs five steps more than this.
        return (records.pipeline
                | 'Once' >> beam.Impulse()
                | 'ForCount' >> beam.Map(lambda _, count: ph.threshold_for(count.get(None, 0)),
                                         beam.pvalue.AsDict(hashed)))


class FindGroups(beam.PTransform):
    """RecordRef -> (source, Node) for every image with a confirmed near-duplicate within ``threshold``:
    a number, or a one-element PCollection of it (``Threshold``). ``storage``: the storage the records'
    frames are read through for the confirmation (the job's, with its options), or the default for the path."""

    def __init__(self, threshold, rounds=ROUNDS, storage=None):
        super().__init__()
        self._threshold = threshold
        self._rounds = rounds
        self._storage = storage  # the storage the records' frames are read through (the job's), or the default

    def expand(self, records):
        threshold = self._threshold
        if isinstance(threshold, beam.PCollection):
            threshold = beam.pvalue.AsSingleton(threshold)
        candidates = (records
                      | 'BandKeys' >> beam.FlatMap(band_keys, threshold)
                      | 'GroupBands' >> beam.CombinePerKey(_MembersFn())
                      | 'CompareInBand' >> beam.ParDo(_CandidatesFn(), threshold))
        places = records | 'Locate' >> beam.FlatMap(located)
        halves = ((places, candidates)
                  | 'WithFirst' >> beam.Flatten()
                  | 'JoinFirst' >> beam.GroupByKey()
                  | 'TellSecond' >> beam.FlatMap(_tell_second))
        links = ((places, halves)
                 | 'WithSecond' >> beam.Flatten()
                 | 'JoinSecond' >> beam.GroupByKey()
                 | 'ByFrameFile' >> beam.FlatMap(_located_pairs)
                 | 'FramesTogether' >> beam.GroupByKey()
                 | 'Confirm' >> beam.ParDo(_ConfirmFn(self._storage)))
        state = (links
                 | 'BothEnds' >> beam.FlatMap(lambda e: [(e[0], (e[1], e[2], e[3])), (e[1], (e[0], e[2], e[3]))])
                 | 'Neighbours' >> beam.GroupByKey()
                 | 'FirstLabels' >> beam.Map(_adjacent))
        unsettled = state  # replaced by every round (there is at least one)
        for round_ in range(1, self._rounds + 1):
            step = (state
                    | f'Send{round_}' >> beam.FlatMap(_send)
                    | f'Hear{round_}' >> beam.GroupByKey()
                    | f'Propagate{round_}' >> beam.ParDo(_PropagateFn()).with_outputs(UNSETTLED, main='nodes'))
            state, unsettled = step.nodes, step[UNSETTLED]
        # The unsettled edges read whole as a side input of one element, joined once.
        relabel = (records.pipeline
                   | 'Once' >> beam.Impulse()
                   | 'JoinLabels' >> beam.Map(lambda _, pairs: join_labels(pairs), beam.pvalue.AsList(unsettled)))
        return (state
                | 'KeyByComponent' >> beam.Map(_component, beam.pvalue.AsSingleton(relabel))
                | 'Components' >> beam.GroupByKey()
                | 'Groups' >> beam.FlatMap(_groups))
