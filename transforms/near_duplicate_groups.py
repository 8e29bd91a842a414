"""Finds groups of near-duplicate images at any scale: the pictures a confirmed link joins, together.

Links: with the ``exact`` check, images that wrote the same JPEG (``imgrec.transforms.same_pictures``), each
picture's copies one component already; with ``perceptual``, each image's few nearest by hash
(``imgrec.transforms.near_duplicate_candidates``), linked when their pixels agree
(``imgrec.transforms.near_duplicate_confirm``, read back from the records as written).

Groups: the links are joined into connected components without gathering them (label propagation: each image takes
the smallest label it hears, ``ROUNDS`` rounds, what is left unsettled joined by a union-find on one worker), and
each component meets on one worker. A label is a source with its member id (``label_of``), ordered by the id as the
candidates order their members: the copies of one picture, linked in a star to the copy with the smallest id, then
start with one label, settled before any round. A component is a group, whole: the pictures a confirmed link joins
stay together, so copies of one picture are never cut apart by a false link elsewhere (stars did that). Only a
component larger than ``MAX_GROUP`` is cut (``bounded_groups``): its links are taken strongest first (most similar,
then nearest hashes) and a link that would make a group larger than ``MAX_GROUP`` is cut; each image lists the links
cut from it (``Node.cut``), and near_duplicates.jsonl and the summary say so. A group's name is its smallest source
by order key.
"""
import array
import collections
import typing

import apache_beam as beam
import numpy as np

from imgrec.contract.hashing import order_key, stable_hash_pair
from imgrec.transforms.elements import GroupedImage
from imgrec.transforms.near_duplicate_candidates import EXACT, NearestHashes, SurveyHashed, member_id
from imgrec.transforms.near_duplicate_confirm import ConfirmCandidates
from imgrec.transforms.same_pictures import SamePictures

# Label rounds: each is a shuffle of the links (and every linked image's neighbours) and a stage of its own; what
# they leave unsettled is joined on one worker, so fewer rounds cost a bigger (still small) gather, never a wrong
# group. Pairs, cliques and stars from their smallest label start settled, and one round checks them: at 100,000
# images saved 50 times over, the build's peak was 40-70 MB lower with one round than with two.
ROUNDS = 1
UNSETTLED = 'unsettled'
# The most images a group may hold: a larger component is cut, its weakest links first (``bounded_groups``).
# Copies of one picture are rarely more than a few dozen; a group must also fit a split's share.
MAX_GROUP = 256
class Node(typing.NamedTuple):
    """An image with at least one confirmed near-duplicate: its group, and its links."""
    group: str         # the group's name: its smallest source by order key
    nearest: str       # the image it is most like (highest similarity, then nearest hash)
    distance: int      # Hamming distance to it: the smaller of the two hashes' (perceptual_hash.nearest_distance)
    neighbours: tuple  # ((source, distance, similarity), ...), sorted: every confirmed link, kept or cut
    similarity: float | None = None  # the check's correlation with ``nearest`` (picture_check.similarity)
    cut: tuple = ()    # the sources whose links to this image were cut to bound the group's size


class Linked(typing.NamedTuple):
    """An image with a confirmed near-duplicate and its Node, keyed by its group's name to meet its GroupedImage."""
    source: str
    node: Node


# FindGroups' second output: (None, (source, its group's name)) of each linked image, for ``IndexGroups``.
NAMES = 'names'


class Member(typing.NamedTuple):
    """An image of a near-duplicate group: what the group needs of its record, and its Node. A group crosses
    Beam as (its name, [Member, ...]), grouped by name (``imgrec.transforms.near_duplicates``)."""
    image: GroupedImage
    node: Node


_INDEX_SALT = 'group index'


def _digest(source):
    """Two 64-bit numbers of ``source``: a name in a GroupIndex (two names with one digest: one chance in 10^28
    among a million)."""
    return stable_hash_pair(_INDEX_SALT, source)


class GroupIndex:
    """{source: its group's name} of the linked images (``IndexGroups``), packed: 20 bytes an image (two digest
    numbers and a group number) in every worker that reads it as a side input, where a dict of the names took
    ~250."""

    def __init__(self, high=b'', low=b'', groups=b'', names=()):
        self._high = np.frombuffer(high, dtype='<u8')
        self._low = np.frombuffer(low, dtype='<u8')
        self._groups = np.frombuffer(groups, dtype='<u4')
        self._names = tuple(names)

    def __reduce__(self):
        return GroupIndex, (self._high.tobytes(), self._low.tobytes(), self._groups.tobytes(), self._names)

    def __len__(self):
        return len(self._high)

    def get(self, source):
        """The name of ``source``'s group, or None."""
        high, low = _digest(source)
        at = int(np.searchsorted(self._high, np.uint64(high)))
        while at < len(self._high) and self._high[at] == high:
            if self._low[at] == low:
                return self._names[self._groups[at]]
            at += 1
        return None


class IndexGroups(beam.CombineFn):
    """(source, group name) pairs -> their GroupIndex; an accumulator holds a digest and a number an image, and the
    names once. Keyed None (FindGroups' NAMES), read as a side input: {None: GroupIndex}, or {} (``group_name``)."""

    def create_accumulator(self):
        return bytearray(), array.array('I'), {}

    def add_input(self, accumulator, pair):
        digests, numbers, names = accumulator
        source, name = pair
        digests += np.array(_digest(source), dtype='<u8').tobytes()
        numbers.append(names.setdefault(name, len(names)))
        return accumulator

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        digests, numbers, names = merged
        for more_digests, more_numbers, more_names in accumulators:
            renumbered = np.array([names.setdefault(name, len(names)) for name in more_names], dtype='<u4')
            digests += more_digests
            numbers.frombytes(renumbered[np.frombuffer(more_numbers, dtype='<u4')].tobytes() if more_numbers else b'')
        return merged

    def extract_output(self, accumulator):
        digests, numbers, names = accumulator
        ordered = sorted(names, key=names.__getitem__)
        pairs = np.frombuffer(bytes(digests), dtype='<u8').reshape(-1, 2)
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        return GroupIndex(pairs[order, 0].tobytes(), pairs[order, 1].tobytes(),
                          np.frombuffer(numbers, dtype='<u4')[order].tobytes() if numbers else b'', ordered)


def group_name(index, source):
    """``source``'s group name in ``index``, the side input of IndexGroups' output ({None: GroupIndex}; {} when no
    image is linked), or None."""
    found = index.get(None)
    return None if found is None else found.get(source)


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


def label_of(source):
    """A source's label in the rounds: (its member id, itself), so labels order as the candidates order their
    members (``near_duplicate_candidates.member_id``) and the copy a star of copies is linked to is the
    smallest."""
    return member_id(source), source


def _adjacent(keyed):
    """A node's first state: (label = the smallest of its own and its neighbours' labels, neighbours)."""
    node, neighbours = keyed
    neighbours = tuple(sorted(set(neighbours)))
    return node, (None, min(map(label_of, (node, *(other for other, *_ in neighbours)))), neighbours)


def _send(keyed):
    node, (_, label, neighbours) = keyed
    yield node, (True, label, neighbours)
    for other, *_ in neighbours:
        yield other, (False, label, None)


class _PropagateFn(beam.DoFn):
    """One round: a node takes the smallest label it hears; an edge whose ends disagree is unsettled, told once,
    by its end with the smaller label (both ends hear each other's), as (smaller, larger)."""

    def process(self, keyed):
        node, messages = keyed
        heard = []
        label = neighbours = None
        for own, value, links in messages:
            if own:
                label, neighbours = value, links
            else:
                heard.append(value)
        for other in sorted({other for other in heard if label < other}):
            yield beam.pvalue.TaggedOutput(UNSETTLED, (label, other))
        yield node, (label, min([label, *heard]), neighbours)


def join_labels(pairs):
    """Union-find over label pairs: {label: the smallest label joined to it}, for labels that change."""
    parent: dict = {}  # a label (``label_of``; anything ordered) -> one it is joined to

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
    """One component -> (its group's name, Linked) for each of its images (``bounded_groups``); NAMES:
    (None, (source, its group's name))."""
    _, nodes = keyed
    links = dict(nodes)
    name_of, cut = bounded_groups(links)
    for source, neighbours in sorted(links.items()):
        nearest, distance, similarity = min(neighbours, key=lambda link: (-link[2], link[1], link[0]))
        node = Node(name_of[source], nearest, distance, neighbours, similarity, cut.get(source, ()))
        yield node.group, Linked(source, node)
        yield beam.pvalue.TaggedOutput(NAMES, (None, (source, node.group)))


class FindGroups(beam.PTransform):
    """RecordRef -> {'nodes': (group name, Linked) for every image with a confirmed near-duplicate, NAMES: (None,
    (source, group name)) of each}; ``check``: ``exact`` or ``perceptual`` (``near_duplicate_candidates.CHECKS``);
    ``storage``: the storage the records' frames are read through for the pixel check (the job's, with its
    options), or the default."""

    def __init__(self, check=EXACT, rounds=ROUNDS, storage=None):
        super().__init__()
        self._check = check
        self._rounds = rounds
        self._storage = storage  # the storage the records' frames are read through (the job's), or the default

    def expand(self, records):
        if self._check == EXACT:  # each picture's copies are one component already (``SamePictures``)
            components = records | 'SamePictures' >> SamePictures()
        else:
            components = self._components(records)
        # Beam would infer the tagged output into the main output's type: it is a (name, Linked) pair.
        groups = components | 'Groups' >> beam.FlatMap(_groups).with_output_types(
            typing.Tuple[str, Linked]).with_outputs(NAMES, main='nodes')
        return {'nodes': groups.nodes, NAMES: groups[NAMES]}

    def _components(self, records):
        """The perceptual check's components: candidates, confirmed, joined by label rounds."""
        hashed = beam.pvalue.AsSingleton(records | 'SurveyHashed' >> SurveyHashed())
        links = (records
                 | 'NearestHashes' >> NearestHashes(hashed)
                 | 'Confirm' >> ConfirmCandidates(hashed, self._storage))
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
                | 'Components' >> beam.GroupByKey())
