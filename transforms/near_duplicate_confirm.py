"""Near-duplicate confirmation: a candidate is a link only if the two images' own pixels agree
(``imgrec.imaging.picture_check``), read back from the records as written.

A candidate comes with both its images' frames (``near_duplicate_candidates.Frame``: the frame file's number in
the build's table of them, the offset, the length), keyed by its first frame's file: the candidates of one file
meet on a worker, which reads both frames of each (ranged reads, coalesced by ``imgrec.storage.frames``), takes
their sources' names and JPEGs from the Examples, decodes the JPEGs small and compares them: no join to the
records. Two records whose JPEGs are the same bytes are confirmed without decoding. No thumbnail crosses any
shuffle; a key's candidates are taken in an order that brings an image's candidates close (``visiting_order``)
and each worker keeps up to ``PICTURES_KEPT`` pictures, those needed soonest, so an image in several candidates
is decoded about once. Most candidates are chance ones whose pictures are nothing alike: a bound of their grey
correlation, computed for a slice of candidates at once (``picture_check.surely_refused``), refuses them
without the rest of the check, which ``picture_check.judge`` would refuse too.
"""
import collections
import heapq

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters, tfrecord
from imgrec.contract import features as F
from imgrec.contract.example import decode_example
from imgrec.imaging import picture_check
from imgrec.storage.frames import FrameReader
from imgrec.storage.storage import given_or_default
from imgrec.transforms.near_duplicate_candidates import Concatenated, unpacked_candidates

# Pictures (decoded for the check) a worker keeps, 12-19 kB each (records of 64 to 224 pixels: the grey zooms'
# levels and the JPEG), so an image in several candidates is decoded about once; and the candidates whose frames
# are read at once (at most half as many as the pictures kept, so that a slice's pictures stay kept to their use).
PICTURES_KEPT = 1024
PAIRS_AT_ONCE = 256


def _source_and_jpeg(frame_bytes):
    """(source, JPEG) of one TFRecord frame as the build wrote it (its Example's source and encoded image), or None
    where it cannot be had (unreadable, damaged): such a candidate is not confirmed (the shard writer reports a
    damaged frame; a heuristic does not fail the build)."""
    if frame_bytes is None or isinstance(frame_bytes, Exception):
        return None
    try:
        example = decode_example(tfrecord.unframe(frame_bytes))
        return example[F.SOURCE].decode(), example[F.IMAGE_ENCODED]
    except Exception:  # pylint: disable=broad-except
        return None


def visiting_order(pairs):
    """The positions of ``pairs`` ((a, b), images numbered from 0) in an order that needs few pictures at once:
    the images renumbered breadth first from the least linked, each component in turn (Cuthill-McKee), and
    each pair taken when its later-renumbered image comes. Chance candidates link images at random, so in
    their sorted order an image's next candidate is anywhere; renumbered so, it is near."""
    neighbours: dict[int, list[int]] = collections.defaultdict(list)
    for a, b in pairs:
        neighbours[a].append(b)
        neighbours[b].append(a)
    # Images by (degree, number), once; each image's neighbours in that order, so the walk sorts nothing.
    least_linked = sorted(neighbours, key=lambda image: (len(neighbours[image]), image))
    place = {image: position for position, image in enumerate(least_linked)}
    for others in neighbours.values():
        others.sort(key=place.__getitem__)
    rank: dict[int, int] = {}
    for start in least_linked:
        if start in rank:
            continue
        rank[start] = len(rank)
        queue = collections.deque([start])
        while queue:
            for other in neighbours[queue.popleft()]:
                if other not in rank:
                    rank[other] = len(rank)
                    queue.append(other)
    keys = [(max(rank[a], rank[b]), min(rank[a], rank[b])) for a, b in pairs]
    return sorted(range(len(pairs)), key=keys.__getitem__)


def _next_uses(pairs):
    """For each pair's two images, the position of that image's next pair (len(pairs) where it has none),
    and each image's first position: what the picture needed last is told by."""
    after = [len(pairs)] * (2 * len(pairs))
    seen: dict = {}
    for position in range(len(pairs) - 1, -1, -1):
        for side, image in enumerate(pairs[position]):
            after[2 * position + side] = seen.get(image, len(pairs))
            seen[image] = position
    return after, seen


def _refused_by_bound(pictures):
    """The positions in ``pictures`` ((Picture or None, Picture or None) a candidate) of the candidates whose
    correlation bound refuses them (``picture_check.surely_refused``); missing pictures are left to the check."""
    present = [position for position, (a, b) in enumerate(pictures) if a is not None and b is not None]
    if not present:
        return set()
    refused = picture_check.surely_refused([pictures[position] for position in present])
    return {position for position, surely in zip(present, refused) if surely}


class _Kept:
    """A frame's source and JPEG (both None: unreadable) and, once decoded, its picture's Levels (None:
    undecodable): what a worker keeps between candidates, 9 kB of levels where a Picture takes 30 kB."""
    __slots__ = ('source', 'jpeg', 'levels', 'decoded')

    def __init__(self, read: tuple[str, bytes] | None):
        self.source: str | None = read[0] if read else None
        self.jpeg: bytes | None = read[1] if read else None
        self.levels: picture_check.Levels | None = None
        self.decoded = False

    def levels_or_none(self):
        """The picture's Levels, decoded the first time (None when it cannot be read or decoded)."""
        if not self.decoded and self.jpeg is not None:
            try:
                self.levels = picture_check.levels_from_jpeg(self.jpeg)
            except Exception:  # pylint: disable=broad-except  # an undecodable record confirms nothing
                self.levels = None
        self.decoded = True
        return self.levels


class _KeptPictures:
    """The frames a worker keeps read (``_Kept``, by their ``Frame``), up to PICTURES_KEPT, across keys: those no
    candidate of the current key needs go first (the least recently used first: another key may need them),
    then the one the key needs last (Belady's rule, from each use's next position: ``_next_uses``)."""

    def __init__(self):
        self._kept: dict = {}  # Frame -> _Kept
        self._spare: collections.OrderedDict = collections.OrderedDict()  # no use left in this key: LRU first
        self._farthest: list = []  # (-next position, Frame): the one needed last first (stale entries skipped)
        self._next_use: dict = {}  # Frame -> its next position in this key

    def __contains__(self, frame):
        return frame in self._kept

    def __getitem__(self, frame):
        return self._kept[frame]

    def start_key(self, first_use):
        """A new key, whose frames' first positions are ``first_use`` ({Frame: position}): kept ones it needs
        are needed again."""
        self._farthest, self._next_use = [], {}
        for frame in [frame for frame in self._spare if frame in first_use]:
            del self._spare[frame]
            self._needed_at(frame, first_use[frame])

    def add(self, frame, read):
        self._kept[frame] = _Kept(read)

    def used(self, frame, following, end):
        """``frame`` was used; its next use is at ``following`` (``end``: none in this key). A frame put out while
        its slice was read (fewer kept than a slice's frames) is read again when next needed: nothing to note."""
        if frame not in self._kept:
            return
        if following < end:
            self._needed_at(frame, following)
        else:
            self._next_use.pop(frame, None)
            self._spare[frame] = None
            self._spare.move_to_end(frame)

    def shrink(self):
        """Puts out kept frames until PICTURES_KEPT are left, or only the frames of the slice being read, not used
        yet (with fewer kept than a slice's frames, they go once used)."""
        while len(self._kept) > PICTURES_KEPT and (self._spare or self._farthest):
            if self._spare:
                del self._kept[self._spare.popitem(last=False)[0]]
                continue
            following, frame = heapq.heappop(self._farthest)
            if self._next_use.get(frame) == -following:
                del self._kept[frame], self._next_use[frame]

    def _needed_at(self, frame, position):
        self._next_use[frame] = position
        heapq.heappush(self._farthest, (-position, frame))


class _ConfirmFn(beam.DoFn):
    """Candidates of one frame file (its number, their ``near_duplicate_candidates.packed_candidate`` bytes
    concatenated) -> links (source, source, distance, similarity), the smaller source first: those whose pictures
    agree (``picture_check.judge``), read by reference (``hashed.files``: the table of frame files,
    ``near_duplicate_candidates.Hashed``), ``PAIRS_AT_ONCE`` candidates' frames in one coalesced read, those of a
    slice whose correlation bound refuses them (``picture_check.surely_refused``) refused first; two records whose
    JPEGs are the same bytes (pixel-identical sources: the encoder is deterministic) are confirmed without decoding.
    A key's candidates are taken in ``visiting_order`` when their images are more than a worker keeps
    (``PICTURES_KEPT``; which it keeps: ``_KeptPictures``), so each picture is decoded about once. Counts the
    candidates confirmed and refused."""

    def __init__(self, storage=None):
        self._storage = storage  # the job's, or None: the default for the path
        self.confirmed = Metrics.counter(*counters.PAIRS_CONFIRMED)
        self.refused = Metrics.counter(*counters.PAIRS_REFUSED)

    def setup(self):
        self._reader = None
        self._kept = _KeptPictures()

    def teardown(self):
        if self._reader is not None:
            self._reader.close()

    def _read(self, frames, files):
        """{Frame: (source, JPEG) or None} of ``frames``: one coalesced read."""
        refs = {frame: (files[frame.file], frame.offset, frame.length) for frame in frames}
        if self._reader is None:
            self._reader = FrameReader(given_or_default(next(iter(refs.values()))[0], self._storage))
        read = self._reader.read(list(set(refs.values())), failures=True)
        return {frame: _source_and_jpeg(read.get(ref)) for frame, ref in refs.items()}

    def process(self, keyed, hashed):
        candidates = unpacked_candidates(keyed[1])
        number: dict = {}  # Frame -> its number in this key
        pairs = [(number.setdefault(first, len(number)), number.setdefault(second, len(number)))
                 for first, second, _ in candidates]
        if len(number) > PICTURES_KEPT:
            order = visiting_order(pairs)
            candidates, pairs = [candidates[i] for i in order], [pairs[i] for i in order]
        after, first_use = _next_uses(pairs)
        kept = self._kept
        kept.start_key({frame: first_use[index] for frame, index in number.items()})
        del number, first_use
        confirmed = 0
        for start in range(0, len(candidates), PAIRS_AT_ONCE):  # the frames of a slice of candidates read at once
            chunk = candidates[start:start + PAIRS_AT_ONCE]
            wanted = {frame for pair in chunk for frame in pair[:2] if frame not in kept}
            for frame, read in (self._read(wanted, hashed.files) if wanted else {}).items():
                kept.add(frame, read)
            reads = [(kept[first], kept[second]) for first, second, _ in chunk]  # before any is put out
            slice_pictures: dict = {}  # _Kept -> its Picture, made once a slice from its levels
            pictures = [_pictures(a, b, slice_pictures) for a, b in reads]
            refused = _refused_by_bound(pictures)
            for position, ((first, second, distance), (a, b)) in enumerate(zip(chunk, reads), start):
                similarity = None if position - start in refused else _judged(a, b, pictures[position - start])
                if similarity is not None:
                    confirmed += 1
                    yield (*sorted((a.source, b.source)), distance, similarity)
                for side, frame in enumerate((first, second)):
                    kept.used(frame, after[2 * position + side], len(candidates))
                kept.shrink()
        self.confirmed.inc(confirmed)
        self.refused.inc(len(candidates) - confirmed)


def _pictures(first, second, made):
    """The two kept records' Pictures where the check compares them (not the same JPEG), else (None, None);
    ``made``: {_Kept: Picture} of the slice, where each is made once."""
    if first.jpeg is None or second.jpeg is None or first.jpeg == second.jpeg:
        return None, None
    return _picture_of(first, made), _picture_of(second, made)


def _picture_of(kept, made):
    if kept not in made:
        levels = kept.levels_or_none()
        made[kept] = None if levels is None else levels.picture()
    return made[kept]


def _judged(first, second, pictures):
    """The similarity of two kept records whose pictures agree, else None; ``pictures``: theirs (``_pictures``)."""
    if first.jpeg is not None and first.jpeg == second.jpeg:  # the same pixels written: nothing to decode
        return 1.0
    picture_a, picture_b = pictures
    if picture_a is None or picture_b is None:
        return None
    same, similarity = picture_check.judge(picture_a, picture_b)
    return similarity if same else None


class ConfirmCandidates(beam.PTransform):
    """(frame file number, ``near_duplicate_candidates.packed_candidate``) -> links (source, source, distance,
    similarity), the smaller source first. ``hashed``: the side input of the records'
    ``near_duplicate_candidates.Hashed`` (its table of frame files); ``storage``: the storage the frames are read
    through (the job's, with its options), or the default for the path."""

    def __init__(self, hashed, storage=None):
        super().__init__()
        self._hashed = hashed
        self._storage = storage

    def expand(self, candidates):
        return (candidates
                | 'FramesTogether' >> beam.CombinePerKey(Concatenated())
                | 'Confirm' >> beam.ParDo(_ConfirmFn(self._storage), self._hashed))
