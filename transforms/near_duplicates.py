"""Finds near-duplicate images at any scale and keeps each group of them in one split.

No pair of images is compared unless their perceptual hashes (``imgrec_imaging.perceptual_hash``, in
every record) agree exactly on one of threshold + 1 bands: each record is keyed by its (band, value)
pairs, and only the hashes of one key meet on a worker, where every pair is compared at once
(vectorised) against the threshold. Every pair within the threshold shares a band (pigeonhole), and
is kept from the first band it shares only. The threshold follows from the number of hashed images
(``perceptual_hash.threshold_for``, a side input), so chance pairs stay rare however many there are.
Images with the same hash are linked to the first of them (by source) instead of to each other, so a
heap of identical hashes costs one link each. Only light (hash, source) pairs cross this shuffle.

The pairs found (edges) are joined into groups, the connected components, without gathering them:
each image starts with the smallest source among itself and its neighbours as its label, and in each of
``ROUNDS`` rounds hears its neighbours' labels and takes the smallest. Labels only travel along edges,
so images with one label are one group; an edge whose ends held different labels in the last round (a
chain longer than the rounds reach) is gathered, with the others like it, on one worker, where a
union-find over those labels alone joins them. A group's name is the smallest source in it.

With ``--near_duplicates group`` (the default) a group's images all go to one split:
- an image in no group keeps the split it would have had (its hash's, or on a refresh the one it was
  published in, when the splits are the same);
- a new group goes where its first image (by order key) would have gone, so groups fill the splits by
  their weights;
- on a refresh, a group goes where most of its published images are (ties: the first by order key), so
  published images only move when a new image joins groups that were in different splits.
With ``report`` the groups are only listed; with ``off`` nothing is hashed. With ``--stratify`` splits
are dealt by class (``transforms.splits``), groups first.
"""
import collections
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import counters
from imgrec_imaging import perceptual_hash as ph
from transforms.constants import Empty, Value
from transforms.splits import MOVES, StratifySingletons, deal_groups, stratify_key

GROUP, REPORT, OFF = 'group', 'report', 'off'
MODES = (GROUP, REPORT, OFF)
# Label rounds: each is a shuffle of the links and a stage of its own; what they leave unsettled is
# joined on one worker, so fewer rounds cost a bigger (still small) gather, never a wrong group.
ROUNDS = 2
ROWS, STATS, MEMBERS, UNSETTLED = 'rows', 'stats', 'members', 'unsettled'
_STAT_KEYS = ('groups', 'images', 'pairs', 'pairs_across_splits', 'pairs_across_labels', 'images_moved')


class NearDuplicate(typing.NamedTuple):
    """A written image with a near-duplicate: one line of near_duplicates.jsonl."""
    source: str
    group: str        # the smallest source in the group: the same for all its images
    distance: int     # Hamming distance to the nearest other image of the group
    nearest: str      # that image
    label: str
    split: str        # where it was written
    moved_from: str   # the split it would have had alone, when the group took it elsewhere; else None
    perceptual_hash: str


class Node(typing.NamedTuple):
    """An image with at least one near-duplicate: its group, and its links."""
    group: str
    nearest: str
    distance: int
    neighbours: tuple  # ((source, distance), ...), sorted


_MASK = (1 << ph.BITS) - 1


def band_keys(record, threshold):
    """((band, value), (hash, source)) for each band of the record's hash; none without a hash. The hash
    travels as a signed 64-bit int, as Beam's integer coder wants it."""
    if record.perceptual_hash is None:
        return
    value = ph.from_hex(record.perceptual_hash)
    signed = value - (1 << ph.BITS) if value >> (ph.BITS - 1) else value
    for band, band_value in enumerate(ph.band_values(value, ph.band_edges(ph.bands_for(threshold)))):
        yield (band, band_value), (signed, record.source)


def pairs_in_bucket(band, members, threshold):
    """(source, source, distance) links among the (hash, source) ``members`` of one band value: pairs
    within ``threshold`` whose first shared band is ``band``, the smaller source first."""
    edges = ph.band_edges(ph.bands_for(threshold))
    members = sorted(((value & _MASK, source) for value, source in members), key=lambda member: member[1])
    first_of = {}
    distinct = []
    for value, source in members:
        first = first_of.setdefault(value, source)
        if first != source:
            if band == 0:  # identical hashes share every band: linked once, to the first of them
                yield first, source, 0
        else:
            distinct.append((value, source))
    if len(distinct) < 2:
        return
    for i, j, distance in ph.pairs_within([value for value, _ in distinct], threshold):
        (a, source_a), (b, source_b) = distinct[i], distinct[j]
        if ph.first_shared_band(a, b, edges) == band:
            yield source_a, source_b, distance


class _CompareFn(beam.DoFn):
    """One band bucket -> its links; counts the comparisons, the cost that grows with the square."""

    def __init__(self):
        self.compared = Metrics.counter(*counters.HASHES_COMPARED)

    def process(self, keyed, threshold):
        (band, _), members = keyed
        members = list(members)
        self.compared.inc(len(members) * (len(members) - 1) // 2)
        yield from pairs_in_bucket(band, members, threshold)


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
    parent = {}

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


def _node(keyed, relabel):
    node, (label, _, neighbours) = keyed
    nearest, distance = min(neighbours, key=lambda link: (link[1], link[0]))
    return node, Node(relabel.get(label, label), nearest, distance, neighbours)


class _Threshold(beam.PTransform):
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
    """RecordRef -> (source, Node) for every image with a near-duplicate within ``threshold``: a number,
    or a one-element PCollection of it (``_Threshold``)."""

    def __init__(self, threshold, rounds=ROUNDS):
        super().__init__()
        self._threshold = threshold
        self._rounds = rounds

    def expand(self, records):
        threshold = self._threshold
        if isinstance(threshold, beam.PCollection):
            threshold = beam.pvalue.AsSingleton(threshold)
        edges = (records
                 | 'BandKeys' >> beam.FlatMap(band_keys, threshold)
                 | 'GroupBands' >> beam.GroupByKey()
                 | 'CompareInBand' >> beam.ParDo(_CompareFn(), threshold))
        state = (edges
                 | 'BothEnds' >> beam.FlatMap(lambda e: [(e[0], (e[1], e[2])), (e[1], (e[0], e[2]))])
                 | 'Neighbours' >> beam.GroupByKey()
                 | 'FirstLabels' >> beam.Map(_adjacent))
        unsettled = None
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
        return state | 'Groups' >> beam.Map(_node, beam.pvalue.AsSingleton(relabel))


def group_split(records, keep_published, names):
    """The split of a group of RecordRefs: where most of its published images are (ties: the first by
    order key), or, with none published, where its first image by order key would go."""
    records = sorted(records, key=lambda record: record.order_key)
    published = [r for r in records if keep_published and r.published_split in names]
    if not published:
        return records[0].split
    counts = collections.Counter(r.published_split for r in published)
    most = max(counts.values())
    return next(r.published_split for r in published if counts[r.published_split] == most)


def preferred_split(record, keep_published, names):
    """An image's split on its own: the one it was published in (on a refresh with the same splits),
    else its hash's."""
    if keep_published and record.published_split in names:
        return record.published_split
    return record.split


class _StatsFn(beam.CombineFn):
    def create_accumulator(self):
        return dict.fromkeys(_STAT_KEYS, 0) | {'largest_group': 0}

    def add_input(self, totals, stats):
        for key in _STAT_KEYS:
            totals[key] += stats[key]
        totals['largest_group'] = max(totals['largest_group'], stats['images'])
        return totals

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for totals in accumulators:
            for key in _STAT_KEYS:
                merged[key] += totals[key]
            merged['largest_group'] = max(merged['largest_group'], totals['largest_group'])
        return merged

    def extract_output(self, totals):
        return totals


class _Resolver:
    """Gives a group's images their split; yields the records, their jsonl rows, moves and stats."""

    def __init__(self):
        self.grouped = Metrics.counter(*counters.IMAGES_GROUPED)
        self.moved = Metrics.counter(*counters.IMAGES_MOVED)

    def resolve(self, group, members, split):
        """``members``: [(RecordRef, Node)]; ``split``: the group's, or None to leave each where it is."""
        final = {record.source: split or record.split for record, _ in members}
        label_of = {record.source: record.label for record, _ in members}
        stats = dict.fromkeys(_STAT_KEYS, 0)
        stats.update(groups=1, images=len(members))
        for record, node in sorted(members, key=lambda member: member[0].source):
            self.grouped.inc()
            moved_from = record.split if final[record.source] != record.split else None
            if moved_from:
                self.moved.inc()
                stats['images_moved'] += 1
                yield beam.pvalue.TaggedOutput(MOVES, (record.split, -1))
                yield beam.pvalue.TaggedOutput(MOVES, (final[record.source], 1))
            yield record._replace(split=final[record.source])
            yield beam.pvalue.TaggedOutput(ROWS, NearDuplicate(
                record.source, group, node.distance, node.nearest, record.label_text, final[record.source],
                moved_from, record.perceptual_hash))
            for other, _ in node.neighbours:
                if other > record.source and other in final:
                    stats['pairs'] += 1
                    stats['pairs_across_splits'] += final[other] != final[record.source]
                    stats['pairs_across_labels'] += label_of[other] != record.label
        yield beam.pvalue.TaggedOutput(STATS, (None, stats))  # keyed: summed by one CombinePerKey


class _SortOutFn(beam.DoFn):
    """A record joined with its Node: a group member (keyed by group) or an image on its own."""

    def __init__(self, keep_published, names):
        self._keep_published = keep_published
        self._names = names

    def process(self, joined):
        _, sides = joined
        nodes = list(sides['node'])
        for record in sides['record']:
            if nodes:
                yield beam.pvalue.TaggedOutput(MEMBERS, (nodes[0].group, (record, nodes[0])))
                continue
            split = preferred_split(record, self._keep_published, self._names)
            if split != record.split:
                yield beam.pvalue.TaggedOutput(MOVES, (record.split, -1))
                yield beam.pvalue.TaggedOutput(MOVES, (split, 1))
            yield record._replace(split=split)


class _GroupFn(beam.DoFn):
    """One group's members -> its split decided (``together``) or each left where it is."""

    def __init__(self, together, keep_published, names):
        self._together = together
        self._keep_published = keep_published
        self._names = names
        self._resolver = _Resolver()

    def process(self, keyed):
        group, members = keyed
        members = list(members)
        split = (group_split([record for record, _ in members], self._keep_published, self._names)
                 if self._together else None)
        yield from self._resolver.resolve(group, members, split)


def _main_label(keyed):
    """A group keyed by the class it is dealt in: its commonest label (the smallest on a tie)."""
    group, members = keyed
    members = list(members)
    counts = collections.Counter(record.label for record, _ in members)
    label = min(counts, key=lambda value: (-counts[value], value))
    return label, (group, members)


class _DealClassFn(beam.DoFn):
    """One class's groups, dealt to splits by what each split lacks of the class (``deal_groups``)."""

    def __init__(self, weights):
        self._weights = weights
        self._resolver = _Resolver()

    def process(self, keyed, class_sizes):
        label, groups = keyed
        groups = list(groups)
        sizes = [(stratify_key(group), group, sum(record.label == label for record, _ in members))
                 for group, members in groups]
        decided = deal_groups(sizes, class_sizes[label], self._weights)
        for group, members in groups:
            yield from self._resolver.resolve(group, members, decided[group])


def _outputs(result):
    return result.records, result[ROWS], result[STATS], result[MOVES]


class NearDuplicates(beam.PTransform):
    """RecordRef -> {'records': the same with their final split, 'near_duplicates': NearDuplicate,
    'summary': one dict of counts for dataset.json, 'moves': (split, -1 or +1) for each image whose split
    changed}.

    ``mode``: group, report or off; ``weights``: the splits, ((name, weight), ...); ``stratify``: deal
    splits by class; ``keep_published``: a refresh with the previous version's splits, whose records'
    ``published_split`` is kept wherever groups allow. ``threshold``: a fixed one, else the one for the
    number of images (``perceptual_hash.threshold_for``).
    """

    def __init__(self, mode, weights, stratify=False, keep_published=False, threshold=None):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f'unknown near-duplicate mode {mode!r}; expected one of {", ".join(MODES)}')
        self._mode = mode
        self._weights = tuple(weights)
        self._stratify = stratify
        self._keep_published = keep_published and not stratify and mode == GROUP
        self._threshold = threshold

    def _describe(self, totals, threshold):
        hashed = self._mode != OFF
        return dict(totals, mode=self._mode, hash=ph.ALGORITHM if hashed else None,
                    threshold=threshold if hashed else None, bands=ph.bands_for(threshold) if hashed else None)

    def expand(self, records):
        pipeline, weights, names = records.pipeline, self._weights, tuple(name for name, _ in self._weights)
        moves, rows, stats = [], [], []
        if self._stratify:
            class_sizes = beam.pvalue.AsDict(records
                                             | 'KeyByLabel' >> beam.Map(lambda r: (r.label, 1))
                                             | 'CountPerLabel' >> beam.CombinePerKey(sum))
        if self._mode != GROUP and self._stratify:  # groups do not decide splits: every image is dealt alone
            no_groups = beam.pvalue.AsDict(pipeline | 'NoGroups' >> Empty())
            dealt = records | 'Stratify' >> StratifySingletons(weights, class_sizes, no_groups)
            records = dealt['records']
            moves.append(dealt[MOVES])
        if self._mode == OFF or self._threshold is not None:
            threshold = pipeline | 'FixedThreshold' >> Value(self._threshold or 0)
        else:
            threshold = records | 'ThresholdForCount' >> _Threshold()
        if self._mode == OFF:
            out = records
        else:
            nodes = records | 'FindGroups' >> FindGroups(threshold)
            joined = ({'record': records | 'KeyBySource' >> beam.Map(lambda r: (r.source, r)), 'node': nodes}
                      | 'JoinGroups' >> beam.CoGroupByKey()
                      | 'SortOut' >> beam.ParDo(_SortOutFn(self._keep_published, names)).with_outputs(
                          MEMBERS, MOVES, main='singletons'))
            moves.append(joined[MOVES])
            members = joined[MEMBERS] | 'GroupMembers' >> beam.GroupByKey()
            if self._mode == GROUP and self._stratify:
                resolved = (members
                            | 'ByClass' >> beam.Map(_main_label)
                            | 'GroupsOfClass' >> beam.GroupByKey()
                            | 'DealGroups' >> beam.ParDo(_DealClassFn(weights), class_sizes).with_outputs(
                                ROWS, STATS, MOVES, main='records'))
                grouped, resolved_rows, resolved_stats, resolved_moves = _outputs(resolved)
                in_groups = beam.pvalue.AsDict(
                    grouped
                    | 'LabelSplit' >> beam.Map(lambda r: ((r.label, r.split), 1))
                    | 'CountInGroups' >> beam.CombinePerKey(sum))
                dealt = joined.singletons | 'Stratify' >> StratifySingletons(weights, class_sizes, in_groups)
                singletons = dealt['records']
                moves.append(dealt[MOVES])
            else:
                resolved = members | 'ResolveGroups' >> beam.ParDo(
                    _GroupFn(self._mode == GROUP, self._keep_published, names)).with_outputs(
                        ROWS, STATS, MOVES, main='records')
                grouped, resolved_rows, resolved_stats, resolved_moves = _outputs(resolved)
                singletons = joined.singletons
            out = (singletons, grouped) | 'AllRecords' >> beam.Flatten()
            rows.append(resolved_rows)
            stats.append(resolved_stats)
            moves.append(resolved_moves)
        nothing = pipeline | 'Nothing' >> Empty()
        totals = ((stats or [nothing])
                  | 'AllStats' >> beam.Flatten()
                  | 'SumStats' >> beam.CombinePerKey(_StatsFn()))
        # Made once from the totals as a side input: none (no group) are the combine's empty totals.
        summary = (pipeline
                   | 'Once' >> beam.Impulse()
                   | 'Describe' >> beam.Map(
                       lambda _, summed, threshold: self._describe(
                           summed.get(None) or _StatsFn().create_accumulator(), threshold),
                       beam.pvalue.AsDict(totals), beam.pvalue.AsSingleton(threshold)))
        return {
            'records': out,
            'near_duplicates': (rows or [nothing]) | 'AllRows' >> beam.Flatten(),
            'summary': summary,
            MOVES: (moves or [nothing]) | 'AllMoves' >> beam.Flatten(),
        }
