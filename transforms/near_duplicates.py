"""Near-duplicate images: found (``imgrec.transforms.near_duplicate_groups``), kept in one split, listed, and
every image dealt to its split (``imgrec.transforms.splits``).

With ``--near_duplicates group`` (the default) a group's images all go to one split, dealt against
what each split still lacks, largest group first, so the shares hold; a near-duplicate pair across two
classes is kept, written in one split and listed (``--near_duplicate_conflicts quarantine`` removes both
images instead: a heuristic never deletes by default). With
``report`` the groups are only listed and every image is dealt on its own; with ``off`` nothing is
hashed. Whatever the mode, a build whose split shares miss their weights by more than
``--split_tolerance`` points (and more than one image) fails before publishing, naming the largest group.
"""
import sys
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.metadata import LISTED_CONFLICT_PAIRS, NEAR_DUPLICATE_CONFLICTS
from imgrec.contract.metadata import NEAR_DUPLICATE_MODES as MODES
from imgrec.contract.reasons import NEAR_DUPLICATE_CONFLICT
from imgrec.console.errors import BuildFailed
from imgrec.imaging import perceptual_hash as ph
from imgrec.imaging import picture_check
from imgrec.versions import failed_build
from imgrec.transforms.constants import Empty
from imgrec.transforms.elements import GroupedImage, Rejected
from imgrec.transforms.near_duplicate_candidates import CHECKS, EXACT, NEIGHBOURS
from imgrec.transforms.near_duplicate_groups import MAX_GROUP, NAMES, FindGroups, IndexGroups, Linked, Member, group_name
from imgrec.transforms.splits import GROUPS, MOVES, DealSplits, split_for

GROUP, REPORT, OFF = MODES
KEEP, QUARANTINE = NEAR_DUPLICATE_CONFLICTS
MEMBERS, REJECTED = 'members', 'rejected'
# dataset.json's near_duplicates.check for the exact check: the same JPEG written (``same_pictures``).
SAME_PICTURE = 'same-jpeg-sha256/2'
_GROUP_STATS = ('groups', 'images', 'images_moved', 'label_conflicts', 'conflicts_written_again', 'links_cut')
_PAIR_STATS = ('pairs', 'pairs_across_splits', 'pairs_across_labels')


class NearDuplicate(typing.NamedTuple):
    """A written image with a near-duplicate: one line of near_duplicates.jsonl."""
    source: str
    group: str        # the group's name (its smallest source by order key): the same for all its images
    distance: int     # Hamming distance to ``nearest``: the smaller of the two hashes' (perceptual_hash.nearest_distance)
    nearest: str      # the image it is most like among those it is linked to
    label: str
    split: str        # where it was written
    moved_from: str | None  # its hash's split (splits.split_for), when the group took it elsewhere; else None
    perceptual_hash: str | None  # None with the exact check, which computes no hash
    similarity: float | None = None  # the pixel check's correlation with ``nearest`` (imgrec.imaging.picture_check)
    nearest_label: str | None = None  # ``nearest``'s label: differs from ``label`` for a pair under two labels
    links_cut: typing.Sequence[str] = ()  # images it was linked to whose links were cut to bound its group's size

    def __reduce__(self):
        """Pickled with its fields alone, read back with the names many rows share interned (``_near_duplicate``)."""
        return _near_duplicate, tuple(self)


_SHARED = tuple(NearDuplicate._fields.index(name)
                for name in ('group', 'label', 'split', 'moved_from', 'nearest_label'))


def _near_duplicate(*fields):
    """The NearDuplicate of ``fields``, its group's name, labels and splits interned: the publication reads every row
    at once (a side input), where one string each a row was a third of what they took."""
    shared: list[typing.Any] = [sys.intern(field) if index in _SHARED and isinstance(field, str) else field
                                for index, field in enumerate(fields)]
    return NearDuplicate(*shared)


def _route(record, group_of):
    """A record -> the same, for the dealing, whose first step runs with this one (the same side input: one step
    over the records, not two), and MEMBERS: its GroupedImage, to its group (keyed by the group's name), when it
    has a near-duplicate. ``group_of``: the GroupIndex of the linked images (``group_name``)."""
    group = group_name(group_of, record.source)
    if group is not None:
        yield beam.pvalue.TaggedOutput(MEMBERS, (group, GroupedImage.of(record)))
    yield record


class _MembersFn(beam.DoFn):
    """A group's GroupedImages and Nodes, met under its name (told apart by type: a CoGroupByKey would cost three
    steps more) -> (name, [Member, ...] by source); with ``quarantine``, each member's class told to itself
    and to the images it is linked to ('labels', ``_label_messages``), for ``_QuarantineFn``."""

    def __init__(self, quarantine):
        self._quarantine = quarantine
        self.grouped = Metrics.counter(*counters.IMAGES_GROUPED)

    def process(self, keyed):
        name, values = keyed
        images, nodes = [], {}
        for value in values:
            if isinstance(value, Linked):
                nodes[value.source] = value.node
            else:
                images.append(value)
        members = sorted((Member(image, nodes[image.source]) for image in images),
                         key=lambda member: member.image.source)
        if self._quarantine:
            for member in members:
                for message in _label_messages(member):
                    yield beam.pvalue.TaggedOutput('labels', message)
        else:
            self.grouped.inc(len(members))
        yield name, members


class _QuarantineFn(beam.DoFn):
    """A group -> the same without its label conflicts (a member linked to an image of another class; 'stats'
    counts it); no group when none is left. Their records are taken out by ``_reject``."""

    def __init__(self):
        self.grouped = Metrics.counter(*counters.IMAGES_GROUPED)
        self.conflicts = Metrics.counter(*counters.LABEL_CONFLICTS)

    def process(self, group, conflicts):
        name, members = group
        kept = [member for member in members if member.image.source not in conflicts]
        self.conflicts.inc(len(members) - len(kept))
        for _ in range(len(members) - len(kept)):
            yield beam.pvalue.TaggedOutput('stats', (None, Stat(_STATS, {'label_conflicts': 1})))
        self.grouped.inc(len(kept))
        if kept:
            yield name, kept


def _reject(record, conflicts):
    """A record: the same, or REJECTED when it is a label conflict."""
    why = conflicts.get(record.source)
    if why is None:
        yield record
    else:
        yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
            record.source, NEAR_DUPLICATE_CONFLICT, why, record.source_size, record.split, record.label_text,
            record.mtime_ns, record.generation, record.ctime_ns, record.inode))


class LabelHeard(typing.NamedTuple):
    """A linked image's class (``label``), told to an image (``own``: to itself) by ``source``."""
    own: bool
    source: str
    label: str


class SplitHeard(typing.NamedTuple):
    """A group member's final ``split`` and ``label``, told to an image (``own``: to itself) by ``source``."""
    own: bool
    split: str
    label: str
    source: str


def _label_messages(member):
    """A linked image's class, told to itself and to each image it is linked to: (source, LabelHeard)."""
    image, node = member
    yield image.source, LabelHeard(True, image.source, image.label_text)
    for other, *_ in node.neighbours:
        yield other, LabelHeard(False, image.source, image.label_text)


def _conflict(keyed):
    """An image linked to one of another class: (source, why), once."""
    source, messages = keyed
    messages = sorted(messages)
    own = next((heard.label for heard in messages if heard.own), None)
    others = sorted((heard.label, heard.source) for heard in messages if not heard.own and heard.label != own)
    if own is not None and others:
        label, other = others[0]
        yield source, f'a near-duplicate of {other}, filed under {label!r}, not {own!r}'


def _pair_messages(group):
    """The links a group shares with other groups (cut to bound its size: the rest are counted in the group,
    ``_pairs_within``): each member with such a link told its final split, and each image it is linked to
    there (once a pair): (source, SplitHeard)."""
    _, members = group
    inside = {image.source for image, _ in members}
    for image, node in members:
        outside = [other for other, *_ in node.neighbours if other not in inside]
        if outside:
            yield image.source, SplitHeard(True, image.split, image.label_text, image.source)
        for other in outside:
            if other > image.source:
                yield other, SplitHeard(False, image.split, image.label_text, image.source)


def _pairs_within(members):
    """(counts, pairs under two labels listed) of the links between a group's own members: what
    ``_pair_stats`` counts for the links that leave it, without a shuffle."""
    placed = {image.source: (image.split, image.label_text) for image, _ in members}
    stats = dict.fromkeys(_PAIR_STATS, 0)
    listed = []
    for image, node in members:
        for other, *_ in node.neighbours:
            if other > image.source and other in placed:
                split, label = placed[other]
                stats['pairs'] += 1
                stats['pairs_across_splits'] += split != image.split
                stats['pairs_across_labels'] += label != image.label_text
                if label != image.label_text:
                    listed.append((image.source, image.label_text, image.split, other, label, split))
    return stats, sorted(listed)[:LISTED_CONFLICT_PAIRS]


def _pair_stats(keyed):
    """One image's links to smaller sources in other groups: their counts, and those under another label listed."""
    source, messages = keyed
    messages = sorted(messages)
    own = next((heard for heard in messages if heard.own), None)
    stats = dict.fromkeys(_PAIR_STATS, 0)
    listed = []
    if own is not None:
        for heard in messages:
            if not heard.own:
                stats['pairs'] += 1
                stats['pairs_across_splits'] += heard.split != own.split
                stats['pairs_across_labels'] += heard.label != own.label
                if heard.label != own.label:
                    listed.append((heard.source, heard.label, heard.split, source, own.label, own.split))
    yield None, Stat(_STATS, stats)
    if listed:
        yield None, Stat(_CONFLICT_PAIRS, sorted(listed)[:LISTED_CONFLICT_PAIRS])


class _DescribeGroupFn(beam.DoFn):
    """A group with its final splits -> its near_duplicates.jsonl rows, its counts ('stats': its links
    among its own members counted here) and, for the links cut from it, each member's split told to the
    images it is linked to in other groups ('pairs', ``_pair_messages``)."""

    def __init__(self, weights, together):
        self._weights = weights
        self._together = together
        self.moved = Metrics.counter(*counters.IMAGES_MOVED)

    def process(self, group):
        name, members = group
        moved = cut = 0
        labels = {image.source: image.label_text for image, _ in members}
        for image, node in sorted(members, key=lambda member: member.image.source):
            alone = split_for(image.source, self._weights)
            moved_from = alone if self._together and alone != image.split else None
            moved += moved_from is not None
            yield NearDuplicate(image.source, name, node.distance, node.nearest, image.label_text, image.split,
                                moved_from, image.perceptual_hash, node.similarity,
                                labels.get(node.nearest, image.label_text), list(node.cut))
            cut += len(node.cut)
        self.moved.inc(moved)
        for message in _pair_messages(group):
            yield beam.pvalue.TaggedOutput('pairs', message)
        within, listed = _pairs_within(members)
        yield beam.pvalue.TaggedOutput('stats', (None, Stat(_STATS, within)))
        if listed:
            yield beam.pvalue.TaggedOutput('stats', (None, Stat(_CONFLICT_PAIRS, listed)))
        yield beam.pvalue.TaggedOutput('stats', (None, Stat(_STATS, dict(
            groups=1, images=len(members), images_moved=moved, label_conflicts=0, largest_group=len(members),
            links_cut=cut))))  # each cut link counted at both ends: halved in _describe
        yield beam.pvalue.TaggedOutput('stats', (None, Stat(_LARGEST, (len(members), name))))


# What the summary sums, each input tagged: a dict of counts, a record's final split, a group's (size, leader),
# pairs under two labels (the first LISTED_CONFLICT_PAIRS by source kept).
_STATS, _SPLIT, _LARGEST, _CONFLICT_PAIRS = 'stats', 'split', 'largest', 'conflict_pairs'


class Stat(typing.NamedTuple):
    """One input of the summary (``_SummaryFn``), each keyed None: ``kind`` _STATS, _SPLIT, _LARGEST or
    _CONFLICT_PAIRS, and its ``value``."""
    kind: str
    value: typing.Any


class _SummaryFn(beam.CombineFn):
    """(totals, {split: images}, the largest group (images, leader) or None): the counts summed
    (``largest_group`` is a maximum), the final splits counted and the largest group kept, in one
    combine where each took one of its own (two steps and two stages each, and a side input)."""

    def create_accumulator(self):
        return dict.fromkeys(_GROUP_STATS + _PAIR_STATS, 0) | {'largest_group': 0}, {}, None, []

    def add_input(self, summary, tagged):
        totals, splits, largest, pairs = summary
        kind, value = tagged
        if kind == _STATS:
            for key, count in value.items():
                totals[key] = max(totals[key], count) if key == 'largest_group' else totals[key] + count
        elif kind == _SPLIT:
            splits[value] = splits.get(value, 0) + 1
        elif kind == _CONFLICT_PAIRS:
            pairs = sorted(set(pairs) | set(map(tuple, value)))[:LISTED_CONFLICT_PAIRS]
        else:
            largest = value if largest is None else max(largest, value)
        return totals, splits, largest, pairs

    def merge_accumulators(self, accumulators):
        merged = self.create_accumulator()
        for totals, splits, largest, pairs in accumulators:
            merged = self.add_input(merged, Stat(_STATS, totals))
            for split, count in splits.items():
                merged[1][split] = merged[1].get(split, 0) + count
            if largest is not None:
                merged = self.add_input(merged, Stat(_LARGEST, largest))
            merged = self.add_input(merged, Stat(_CONFLICT_PAIRS, pairs))
        return merged

    def extract_output(self, summary):
        return summary


def check_shares(counts, weights, tolerance, largest, published=False):
    """The one-line reason a build with ``counts`` ({split: images}) misses ``weights`` by more than
    ``tolerance`` percentage points and more than one image, or None. ``largest``: (images, group) of
    the largest near-duplicate group, or None; ``published``: published images kept their splits."""
    total = sum(counts.values())
    whole = sum(weight for _, weight in weights)
    for name, weight in weights:
        wanted = total * weight / whole
        if abs(counts.get(name, 0) - wanted) > max(1.0, total * tolerance / 100):
            why = [f'the largest near-duplicate group holds {largest[0]} images ({largest[1]})' if largest
                   else 'no near-duplicate group']
            if published:
                why.append('published images keep their splits')
            return (f'split {name} would hold {counts.get(name, 0)} of {total} images '
                    f'({100 * counts.get(name, 0) / total:.1f}%), asked {100 * weight / whole:.1f}% '
                    f'({"; ".join(why)}): --split_tolerance {_needed(counts, weights):.1f} accepts it'
                    + (', --resplit deals every image again' if published else ''))
    return None


def _needed(counts, weights):
    total, whole = sum(counts.values()), sum(weight for _, weight in weights)
    return max(abs(100 * counts.get(name, 0) / total - 100 * weight / whole) for name, weight in weights) + 0.05


def _regroup(groups, records):
    """The groups (name, [Member]) again, each image in the split it was dealt: for ``report``, whose groups
    were dealt image by image."""
    final = records | 'FinalBySource' >> beam.Map(lambda record: (record.source, record.split))
    nodes = groups | 'NodesBySource' >> beam.FlatMap(
        lambda group: [(member.image.source, (group[0], member)) for member in group[1]])
    return ({'group': nodes, 'final': final}
            | 'JoinFinal' >> beam.CoGroupByKey()
            | 'FinalMembers' >> beam.FlatMap(lambda joined: [
                (name, member._replace(image=member.image._replace(split=split)))
                for name, member in joined[1]['group'] for split in joined[1]['final']])
            | 'FinalGroups' >> beam.GroupByKey())


class NearDuplicates(beam.PTransform):
    """RecordRef -> {'records': the same with their final split, 'near_duplicates': NearDuplicate,
    'summary': one dict of counts for dataset.json, 'moves': (split, -1 or +1) for each image whose split
    is not its hash's, 'rejected': Rejected label conflicts}.

    ``mode``: group, report or off; ``check``: how they are found, ``exact`` (the same picture written) or
    ``perceptual`` (each image's few nearest by hash, confirmed by their pixels: ``near_duplicate_groups``);
    ``weights``: the splits, ((name, weight), ...); ``stratify``: deal each class on its own; ``keep_published``:
    records' ``published_split`` is final. ``tolerance``: the percentage points a split's share may miss its weight
    by; ``staging_dir``: where a share check that fails leaves its counts, for the failed build's report
    (``imgrec.versions.failed_build``), through ``storage`` (the output's storage, with the job's options) when given.
    """

    def __init__(self, mode, weights, stratify=False, keep_published=False, tolerance=1.0,
                 staging_dir=None, storage=None, conflicts=KEEP, conflicts_before=None, check=EXACT):
        super().__init__()
        self._conflicts_before = conflicts_before  # sources the previous version quarantined as conflicts, or None
        if mode not in MODES:
            raise ValueError(f'unknown near-duplicate mode {mode!r}; expected one of {", ".join(MODES)}')
        if conflicts not in NEAR_DUPLICATE_CONFLICTS:
            raise ValueError(f'unknown near-duplicate conflict rule {conflicts!r}; expected one of '
                             f'{", ".join(NEAR_DUPLICATE_CONFLICTS)}')
        if check not in CHECKS:
            raise ValueError(f'unknown near-duplicate check {check!r}; expected one of {", ".join(CHECKS)}')
        self._conflicts = conflicts
        self._mode = mode
        self._check = check
        self._weights = tuple(weights)
        self._stratify = stratify
        self._keep_published = keep_published
        self._tolerance = tolerance
        self._staging_dir = staging_dir  # where a failed share check leaves its counts for the failed build's report
        self._storage = storage

    def _describe(self, totals, pairs):
        grouped = self._mode != OFF
        perceptual = grouped and self._check != EXACT
        listed = [dict(zip(('source', 'label', 'split', 'other', 'other_label', 'other_split'), pair)) for pair in pairs]
        totals = dict(totals, links_cut=totals.get('links_cut', 0) // 2)
        return dict(totals, mode=self._mode, hash=ph.ALGORITHM if perceptual else None,
                    threshold=ph.MAX_THRESHOLD if perceptual else None,
                    neighbours=NEIGHBOURS if perceptual else None,
                    check=(picture_check.ALGORITHM if perceptual else SAME_PICTURE) if grouped else None,
                    max_group=MAX_GROUP if grouped else None, conflicts=self._conflicts, label_conflict_pairs=listed)

    def _checked(self, _, summary):
        totals, counts, largest, pairs = summary.get(None) or _SummaryFn().create_accumulator()
        reason = check_shares(counts, self._weights, self._tolerance, largest, self._keep_published)
        if reason:
            if self._staging_dir:
                failed_build.record(self._staging_dir, {'dealt': dict(counts)}, self._storage)
            raise BuildFailed(reason)
        return self._describe(totals, pairs)

    def _groups(self, records):
        """(records to deal, groups (name, [Member]), the GroupIndex side input of their images, rejected, [their
        stats]) before dealing."""
        quarantine = self._mode == GROUP and self._conflicts == QUARANTINE
        found = records | 'FindGroups' >> FindGroups(self._check, storage=self._storage)
        group_of = beam.pvalue.AsDict(found[NAMES] | 'IndexGroups' >> beam.CombinePerKey(IndexGroups()))
        # Nothing goes to REJECTED from here: the empty collection keep and report return.
        routed = records | 'Route' >> beam.FlatMap(_route, group_of).with_outputs(MEMBERS, REJECTED, main='records')
        met = ((routed[MEMBERS], found['nodes'])
               | 'ImagesAndNodes' >> beam.Flatten()
               | 'GroupMembers' >> beam.GroupByKey()
               | 'Members' >> beam.ParDo(_MembersFn(quarantine)).with_outputs('labels', main='groups'))
        if not quarantine:  # only quarantine asks who is linked across labels (keep counts the pairs: _pairs_within)
            return routed.records, met.groups, group_of, routed[REJECTED], []
        conflicts = beam.pvalue.AsDict(met.labels
                                       | 'HearLabels' >> beam.GroupByKey()
                                       | 'LabelConflicts' >> beam.FlatMap(_conflict))
        kept = met.groups | 'Quarantine' >> beam.ParDo(_QuarantineFn(), conflicts).with_outputs('stats', main='groups')
        checked = routed.records | 'RejectConflicts' >> beam.FlatMap(_reject, conflicts).with_outputs(
            REJECTED, main='kept')
        return checked.kept, kept.groups, group_of, checked[REJECTED], [kept.stats]

    def expand(self, records):
        pipeline, weights = records.pipeline, self._weights
        if self._mode == OFF:
            groups, rejected = pipeline | 'NoGroups' >> Empty(), pipeline | 'NoConflicts' >> Empty()
            group_of, conflict_stats = None, []
        else:
            records, groups, group_of, rejected, conflict_stats = self._groups(records)
        if self._mode == REPORT:  # listed, not kept together: every image is dealt on its own
            dealt = {'records': records, 'groups': pipeline | 'NoneTogether' >> Empty()} | 'DealSplits' >> (
                DealSplits(weights, self._stratify, self._keep_published))
            listed = _regroup(groups, dealt['records'])
        else:
            dealt = {'records': records, 'groups': groups} | 'DealSplits' >> DealSplits(
                weights, self._stratify, self._keep_published, group_of)
            listed = dealt[GROUPS]
        described = listed | 'Describe' >> beam.ParDo(_DescribeGroupFn(weights, self._mode == GROUP)).with_outputs(
            'stats', 'pairs', main='rows')
        pair_stats = (described.pairs
                      | 'HearSplits' >> beam.GroupByKey()
                      | 'PairStats' >> beam.FlatMap(_pair_stats))
        final_splits = dealt['records'] | 'FinalSplit' >> beam.Map(lambda record: (None, Stat(_SPLIT, record.split)))
        written_again = []
        if self._conflicts_before is not None:  # a refresh: its previous version's conflicts written this time
            written_again = [dealt['records'] | 'WrittenAgain' >> beam.FlatMap(
                lambda record, before: [(None, Stat(_STATS, {'conflicts_written_again': 1}))] if record.source in before
                else [], beam.pvalue.AsDict(self._conflicts_before | 'AsKeys' >> beam.Map(lambda s: (s, True))))]
        totals = ((described.stats, pair_stats, *conflict_stats, *written_again, final_splits)
                  | 'AllStats' >> beam.Flatten()
                  | 'SumStats' >> beam.CombinePerKey(_SummaryFn()))
        # Made once from the sums as a side input; it fails the build here, before anything is published.
        summary = (pipeline
                   | 'Once' >> beam.Impulse()
                   | 'CheckShares' >> beam.Map(self._checked, beam.pvalue.AsDict(totals)))
        return {'records': dealt['records'], 'near_duplicates': described.rows, 'summary': summary,
                MOVES: dealt[MOVES], REJECTED: rejected}
