"""Finds groups of near-duplicate images at any scale: tight groups, which cannot chain into one.

Candidates: no pair of images is compared unless their perceptual hashes (``imgrec.imaging.
perceptual_hash``, in every record) agree exactly on one of threshold + 1 bands: each record is keyed by
its (band, value) pairs, and only the hashes of one key meet on a worker, where every pair is compared
at once (vectorised) against the threshold. Every pair within the threshold shares a band
(pigeonhole), and is kept from the first band it shares only. The threshold follows from the number of
hashed images (``perceptual_hash.threshold_for``, a side input). Only light (hash, source, thumbnail)
tuples cross this shuffle, and not one by one: a band has few values (2 to the band's bits), so the
members of each (band, value) are gathered by a combine that Beam lifts, each worker sending one list a
key, not one element an image and band.

Confirmation: a candidate is a link only if the two images' colour thumbnails agree too
(``perceptual_hash.same_picture``), a check on what the grey hash cannot see. The thumbnails travel in
the band buckets, so a candidate is confirmed where it is found: no shuffle joins them to their pairs
(which cost three elements an image: a thumbnail keyed by source, each end of a pair, the pair).

Groups: the links are joined into connected components without gathering them (label propagation:
each image takes the smallest source it hears, ``ROUNDS`` rounds, what is left unsettled joined by a
union-find on one worker), and each component is then cut into stars on one worker (``star_groups``):
the image with the most links leads a group of its linked images not yet in one, then the next, and so
on. Every member of a group is linked to its leader, confirmed by both checks, so a group never grows
through chains: A near B near C does not put A with C unless C is near the leader too. A group's name
is its leader's source.
"""
import functools
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.hashing import order_key
from imgrec.imaging import perceptual_hash as ph

# Label rounds: each is a shuffle of the links and a stage of its own; what they leave unsettled is
# joined on one worker, so fewer rounds cost a bigger (still small) gather, never a wrong group.
ROUNDS = 2
UNSETTLED = 'unsettled'


class Node(typing.NamedTuple):
    """An image with at least one confirmed near-duplicate: its group, and its links."""
    group: str         # the group's leader
    nearest: str
    distance: int
    neighbours: tuple  # ((source, distance), ...), sorted: every link, to its group or another


_MASK = (1 << ph.BITS) - 1


def band_keys(record, threshold):
    """((band, value), (hash, source, thumbnail)) for each band of the record's hash; none without a hash.
    The hash travels as a signed 64-bit int, as Beam's integer coder wants it."""
    if record.perceptual_hash is None:
        return
    value = ph.from_hex(record.perceptual_hash)
    signed = value - (1 << ph.BITS) if value >> (ph.BITS - 1) else value
    for band, band_value in enumerate(ph.band_values(value, ph.band_edges(ph.bands_for(threshold)))):
        yield (band, band_value), (signed, record.source, record.thumbnail)


@functools.cache
def _earlier_bands(threshold):
    """For each band, the bit masks of the bands before it (bits counted from the most significant)."""
    masks = [((1 << (stop - start)) - 1) << (ph.BITS - stop) for start, stop in ph.band_edges(ph.bands_for(threshold))]
    return tuple(tuple(masks[:band]) for band in range(len(masks)))


def pairs_in_bucket(band, members, threshold):
    """(source, source, distance) candidates among the (hash, source) ``members`` of one band value:
    pairs within ``threshold`` whose first shared band is ``band``, the smaller source first. Two members
    share this band; it is their first if every earlier band has a bit that differs (masks, not the
    band values of both hashes: this test runs for every pair within the threshold in every band)."""
    earlier = _earlier_bands(threshold)[band]
    members = sorted(((value & _MASK, source) for value, source in members), key=lambda member: member[1])
    first_of: dict[int, str] = {}
    distinct = []
    for value, source in members:
        first = first_of.setdefault(value, source)
        if first != source:
            if band == 0:  # identical hashes share every band: a candidate of the first of them, once
                yield first, source, 0
        else:
            distinct.append((value, source))
    if len(distinct) < 2:
        return
    for i, j, distance in ph.pairs_within([value for value, _ in distinct], threshold):
        (a, source_a), (b, source_b) = distinct[i], distinct[j]
        differ = a ^ b
        if all(differ & mask for mask in earlier):
            yield source_a, source_b, distance


def star_groups(links):
    """{source: leader} of one component: ``links`` is {source: ((neighbour, distance), ...)}.

    In order of most links (ties: order key), an image not yet in a group leads one, and takes each of
    its linked images not yet in a group. Deterministic: it depends on the links only.
    """
    leader_of = {}
    for source in sorted(links, key=lambda s: (-len(links[s]), order_key(s))):
        if source in leader_of:
            continue
        leader_of[source] = source
        for other, _ in links[source]:
            leader_of.setdefault(other, source)
    return leader_of


class _MembersFn(beam.CombineFn):
    """The (hash, source, thumbnail) members of one band value, as a list: gathered on each worker before the
    shuffle."""

    def create_accumulator(self):
        return []

    def add_input(self, members, member):
        members.append(member)
        return members

    def merge_accumulators(self, accumulators):
        merged = []
        for members in accumulators:
            merged.extend(members)
        return merged

    def extract_output(self, members):
        return members


class _CompareFn(beam.DoFn):
    """One band bucket -> its confirmed candidates: pairs within the threshold whose thumbnails agree.
    Counts the comparisons (the cost that grows with the square), and the candidates confirmed and refused."""

    def __init__(self):
        self.compared = Metrics.counter(*counters.HASHES_COMPARED)
        self.confirmed = Metrics.counter(*counters.PAIRS_CONFIRMED)
        self.refused = Metrics.counter(*counters.PAIRS_REFUSED)

    def process(self, keyed, threshold):
        (band, _), members = keyed
        members = list(members)
        thumbnails = {source: thumbnail for _, source, thumbnail in members}
        self.compared.inc(len(members) * (len(members) - 1) // 2)
        pairs = list(pairs_in_bucket(band, [(value, source) for value, source, _ in members], threshold))
        agree = ph.same_pictures([(thumbnails[a], thumbnails[b]) for a, b, _ in pairs])  # a bucket's pairs at once
        self.confirmed.inc(sum(agree))
        self.refused.inc(len(pairs) - sum(agree))
        for pair, same in zip(pairs, agree):
            if same:
                yield pair


def _adjacent(keyed):
    """A node's first state: (label = smallest of itself and its neighbours, neighbours)."""
    node, neighbours = keyed
    neighbours = tuple(sorted(set(neighbours)))
    return node, (None, min(node, *(other for other, _ in neighbours)), neighbours)


def _send(keyed):
    node, (_, label, neighbours) = keyed
    yield node, (True, label, neighbours)
    for other, _ in neighbours:
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


def _stars(keyed):
    """One component -> (source, Node) for each of its images."""
    _, nodes = keyed
    links = dict(nodes)
    leader_of = star_groups(links)
    for source, neighbours in sorted(links.items()):
        nearest, distance = min(neighbours, key=lambda link: (link[1], link[0]))
        yield source, Node(leader_of[source], nearest, distance, neighbours)


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
    a number, or a one-element PCollection of it (``Threshold``)."""

    def __init__(self, threshold, rounds=ROUNDS):
        super().__init__()
        self._threshold = threshold
        self._rounds = rounds

    def expand(self, records):
        threshold = self._threshold
        if isinstance(threshold, beam.PCollection):
            threshold = beam.pvalue.AsSingleton(threshold)
        links = (records
                 | 'BandKeys' >> beam.FlatMap(band_keys, threshold)
                 | 'GroupBands' >> beam.CombinePerKey(_MembersFn())
                 | 'CompareInBand' >> beam.ParDo(_CompareFn(), threshold))
        state = (links
                 | 'BothEnds' >> beam.FlatMap(lambda e: [(e[0], (e[1], e[2])), (e[1], (e[0], e[2]))])
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
                | 'Stars' >> beam.FlatMap(_stars))
