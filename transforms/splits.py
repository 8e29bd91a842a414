"""Deals the images to the splits so that each split holds the share its weight asks for.

One rule, whatever the options (docs/near-duplicates.md, "Splits"). A *scope* is the whole dataset, or
one class with ``--stratify``; each scope's targets are its size apportioned by the weights (largest
remainders: each within one image), and with ``--stratify`` every split gets at least one image of a
class that has as many images as there are splits. Then, in order:
1. a published image (the previous version in the output has the same ``--splits``, and the image the
   same bytes) stays in the split it was published in, unless ``--resplit``;
2. a group of near-duplicates with published images goes where most of them are (ties: the first by
   order key): its new images follow;
3. every other group, largest first (ties: its name's order key), goes to the split that lacks most;
4. the images in no group fill what each split still lacks: ranked by the same salted hash of their
   source that ``split_for`` cuts, and the ranks cut into one run a split, in the order of the weights.
A refresh and a ``--full`` build into the same output therefore decide the same splits. In a new output
an image's split is its hash's (``split_for``) unless its hash lies near a cut between two splits:
adding or removing ``m`` images moves at most about ``2 m`` others across each cut.

Ranking needs no scope gathered on one worker: like the shards (``imgrec.transforms.sharding``), images are
bucketed by the top bits of their hash, and a rank is the count of the scope's images in earlier
buckets (a small side input) plus the position inside the bucket. Groups are fewer than images, and each
scope's groups meet on one worker as their facts (``GroupFacts``: a name and three numbers), not their
images; the splits dealt reach the groups, and each grouped image's record where the others are keyed to be
ranked, as a side input.
"""
import collections
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.hashing import order_key, stable_hash
from imgrec.transforms.elements import LISTED, Tally
from imgrec.transforms.near_duplicate_groups import group_name
from imgrec.transforms.sharding import bucket_of

_SALT = 'split'
MOVES, GROUPS = 'moves', 'groups'
WHOLE = ''  # the scope of every image without --stratify


def split_for(source, weights):
    """The split of ``source`` for ``weights`` (an ordered sequence of (split name, integer weight)) by
    its hash alone: where a listed image is counted before the splits are dealt."""
    point = stable_hash(_SALT, source) % sum(weight for _, weight in weights)
    for name, weight in weights:
        if point < weight:
            return name
        point -= weight
    raise AssertionError('unreachable: point is below the total weight')


class AssignSplit(beam.PTransform):
    """ImageRef -> the same ImageRef with its hash's ``split`` (``split_for``)."""

    def __init__(self, weights):
        super().__init__()
        self._weights = tuple(weights)

    def expand(self, refs):
        weights = self._weights
        return refs | 'SetSplit' >> beam.Map(lambda ref: ref._replace(split=split_for(ref.source, weights)))


def deal_key(source):
    """(salted hash, source): the order images in no group are dealt in, the hash ``split_for`` cuts."""
    return stable_hash(_SALT, source), source


def apportion(total, weights):
    """{split: count} summing to ``total``, each within 1 of its share (largest remainders; equal
    remainders go to the split named first). ``weights`` may be any non-negative numbers."""
    weights = [(name, weight) for name, weight in weights]
    whole = sum(weight for _, weight in weights)
    if not whole:
        counts = {name: 0 for name, _ in weights}
        if total:
            counts[weights[0][0]] = total
        return counts
    counts, remainders = {}, []
    for position, (name, weight) in enumerate(weights):
        share = total * weight / whole
        counts[name] = int(share)
        remainders.append((-(share - int(share)), position, name))
    for _, _, name in sorted(remainders)[:total - sum(counts.values())]:
        counts[name] += 1
    return counts


def targets_for(total, weights, at_least_one=False):
    """A scope's {split: images}: ``apportion``, and ``at_least_one`` (a class, with --stratify) gives
    each split one image when there are enough, taken from the split most over its share."""
    counts = apportion(total, weights)
    if at_least_one and total >= len(counts):
        whole = sum(weight for _, weight in weights)
        for name, _ in weights:
            if not counts[name]:
                donors = [other for other in counts if counts[other] > 1]
                donor = max(donors, key=lambda other: (counts[other] - total * dict(weights)[other] / whole,
                                                      counts[other]))
                counts[donor] -= 1
                counts[name] = 1
    return counts


def _most_lacking(targets, given, names):
    return max(names, key=lambda name: (targets[name] - given[name], -names.index(name)))


def deal_groups(groups, targets, placed, weights):
    """{group: split} for one scope's groups of no published image.

    ``groups``: (images, order key, group); ``placed``: {split: images already there (published ones,
    and groups that follow them)}. The largest group first (ties: order key) goes to the split that
    lacks most of its target (ties: the first named), so the splits end within one group of it.
    """
    names = [name for name, _ in weights]
    given = collections.Counter(placed)
    decided = {}
    for size, _, group in sorted(groups, key=lambda item: (-item[0], item[1])):
        split = _most_lacking(targets, given, names)
        decided[group] = split
        given[split] += size
    return decided


def published_group_split(members, names):
    """The split of a group with published images (``members``: their records or GroupedImages): where most of
    them are (ties: the first by order key), or None when none is published."""
    published = sorted((record for record in members if record.published_split in names),
                       key=lambda record: record.order_key)
    if not published:
        return None
    counts = collections.Counter(record.published_split for record in published)
    most = max(counts.values())
    return next(record.published_split for record in published if counts[record.published_split] == most)


def singleton_quotas(targets, placed, singletons, weights):
    """{split: images in no group it gets} of one scope, summing to ``singletons``.

    ``placed`` is {split: images already there}. Each split is filled up to its target; when the placed
    ones already hold more than a split's target, what is left over is apportioned by what the others lack.
    """
    lacking = [(name, max(0, targets[name] - placed.get(name, 0))) for name, _ in weights]
    if sum(need for _, need in lacking) == singletons:
        return dict(lacking)
    return apportion(singletons, lacking)


def split_of_rank(rank, quotas, weights):
    """The split of the ``rank``-th (from 0) image in no group of a scope: the ranks are cut into one run
    a split, in the order of ``weights``."""
    for name, _ in weights:
        if rank < quotas[name]:
            return name
        rank -= quotas[name]
    raise AssertionError(f'rank beyond the scope: {rank} left')


class _Mover:
    """Gives a record its final split; counts and reports (MOVES) the change from its hash split."""

    def __init__(self):
        self.moved = Metrics.counter(*counters.IMAGES_DEALT)

    def place(self, record, split):
        """(``record`` in ``split``, the MOVES outputs to yield before it: none if ``split`` is its hash's)."""
        if split == record.split:
            return record, ()
        self.moved.inc()
        return record._replace(split=split), (beam.pvalue.TaggedOutput(MOVES, (Tally(LISTED, record.split), -1)),
                                              beam.pvalue.TaggedOutput(MOVES, (Tally(LISTED, split), 1)))


# Every count DealSplits needs is summed in one of two combines, each count keyed by a Count: before
# dealing, the scopes' sizes, their published images and their images in no group; after, the buckets
# and what the groups placed. A combine a count cost two steps, two stages and a side input each.
_SCOPE, _PUBLISHED, _FREE, _BUCKET, _PLACED = 'scope', 'published', 'free', 'bucket', 'placed'
_COUNTS, _KEPT, _GROUPED = 'counts', 'kept', 'grouped'


class Count(typing.NamedTuple):
    """A key of DealSplits's counts, (Count, images) pairs: ``kind`` is _SCOPE (the scope's images), _FREE (its
    images in no group), _PUBLISHED (its published images kept in ``split``), _PLACED (its images the groups
    put in ``split``) or _BUCKET (its images in no group in ``bucket``)."""
    kind: str
    scope: str        # WHOLE, or a class with --stratify
    split: str = ''   # _PUBLISHED, _PLACED
    bucket: int = 0   # _BUCKET


def _in_splits(counts, kinds):
    """{scope: {split: count}} of the summed counts of ``kinds`` (_PUBLISHED, _PLACED)."""
    found: collections.defaultdict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, count in counts.items():
        if key.kind in kinds:
            found[key.scope][key.split] += count
    return found


def _buckets(counts):
    """{(scope, bucket): count} of the summed _BUCKET counts."""
    return {(key.scope, key.bucket): count for key, count in counts.items() if key.kind == _BUCKET}


class _SortOutFn(beam.DoFn):
    """An image: a published one stays in its split (_KEPT, and MOVES), any other is dealt (the main output: by
    its rank, or with its group); _COUNTS: what an image in no group adds to the counts before dealing (a group's
    images are counted by ``_Placement.facts``). ``group_of``: ``DealSplits``'."""

    def __init__(self, scope, names, keep_published):
        self._scope = scope
        self._names = names
        self._keep_published = keep_published
        self._mover = _Mover()

    def process(self, record, group_of=None):
        scope = self._scope(record)
        alone = group_of is None or group_name(group_of, record.source) is None
        if alone:
            yield beam.pvalue.TaggedOutput(_COUNTS, (Count(_SCOPE, scope), 1))
        if self._keep_published and record.published_split in self._names:
            if alone:
                yield beam.pvalue.TaggedOutput(_COUNTS, (Count(_PUBLISHED, scope, split=record.published_split), 1))
            kept, moves = self._mover.place(record, record.published_split)
            yield from moves
            yield beam.pvalue.TaggedOutput(_KEPT, kept)
        else:
            if alone:
                yield beam.pvalue.TaggedOutput(_COUNTS, (Count(_FREE, scope), 1))
            yield record


class GroupFacts(typing.NamedTuple):
    """What dealing a group needs, and no more of it: its ``name``, its ``images``, the split most of its
    published images hold (``published_group_split``; None when none is, or published splits are not
    kept), and how many of its images follow the group (those not fixed in a published split)."""
    name: str
    images: int
    published_split: str | None
    following: int


class _Placement:
    """The rules shared by the dealing of groups and the placing of their images."""

    def __init__(self, weights, stratify, keep_published):
        self._weights = weights
        self._names = [name for name, _ in weights]
        self._stratify = stratify
        self._keep_published = keep_published

    def fixed(self, record):
        return self._keep_published and record.published_split in self._names

    def final(self, record, group_split):
        return record.published_split if self.fixed(record) else group_split

    def facts(self, group, scope):
        """(the group's scope, its GroupFacts); _COUNTS: (Count(_SCOPE, scope), images) of its images' scopes."""
        name, members = group
        images = [member.image for member in members]
        for each_scope, count in collections.Counter(map(scope, images)).items():
            yield beam.pvalue.TaggedOutput(_COUNTS, (Count(_SCOPE, each_scope), count))
        published = published_group_split(images, self._names) if self._keep_published else None
        yield scope(images[0]), GroupFacts(name, len(images), published,
                                           sum(not self.fixed(image) for image in images))


class _DealScopeFn(beam.DoFn):
    """One scope's groups, (scope, [GroupFacts, ...]) -> (group name, split) for each: the groups meet on one
    worker as their facts, a few numbers each, not as their images."""

    def __init__(self, weights, stratify):
        self._weights = weights
        self._stratify = stratify

    def process(self, keyed, before):
        scope, groups = keyed
        targets = targets_for(before[Count(_SCOPE, scope)], self._weights, self._stratify)
        given = _in_splits(before, (_PUBLISHED,))[scope]
        split_of, new = {}, []
        for facts in sorted(groups):
            if facts.published_split is None:
                new.append((facts.images, order_key(facts.name), facts.name))
                continue
            split_of[facts.name] = facts.published_split
            given[facts.published_split] += facts.following
        split_of.update(deal_groups(new, targets, given, self._weights))
        yield from split_of.items()


class _PlaceGroupFn(beam.DoFn):
    """A group, (name, [Member, ...]), and the splits dealt -> the group with its members' final splits;
    _COUNTS: (Count(_PLACED, scope, split), images) it put there. Its records are placed by ``_KeyByBucketFn``."""

    def __init__(self, placement, scope, stratify):
        self._placement = placement
        self._scope = scope
        self._stratify = stratify

    def process(self, group, split_of):
        name, members = group
        scope = self._scope(members[0].image)
        placed, counts = [], collections.Counter[Count]()
        for member in members:
            final = self._placement.final(member.image, split_of[name])
            placed.append(member._replace(image=member.image._replace(split=final)))
            # Counted in the image's own scope: a group kept under two labels (--stratify) is dealt with
            # its first image's class, but each image fills its own class's share.
            counts[Count(_PLACED, member.image.label if self._stratify else scope, split=final)] += 1
        for count in sorted(counts.items()):
            yield beam.pvalue.TaggedOutput(_COUNTS, count)
        yield name, placed


class _KeyByBucketFn(beam.DoFn):
    """An image to deal by rank -> ((scope, bucket), record); _COUNTS: one more in its bucket (Count(_BUCKET)). An
    image of a group dealt together (``group_of``, ``DealSplits``') -> _GROUPED: its record in its group's split
    (``split_of``, the group's published images having stayed in theirs: ``_SortOutFn``), and MOVES."""

    def __init__(self, scope):
        self._scope = scope
        self._mover = _Mover()

    def process(self, record, before, split_of=None, group_of=None):
        group = None if group_of is None else group_name(group_of, record.source)
        if group is not None:
            placed, moves = self._mover.place(record, split_of[group])
            yield from moves
            yield beam.pvalue.TaggedOutput(_GROUPED, placed)
            return
        scope = self._scope(record)
        bucket = bucket_of(deal_key(record.source)[0], before[Count(_FREE, scope)])
        yield beam.pvalue.TaggedOutput(_COUNTS, (Count(_BUCKET, scope, bucket=bucket), 1))
        yield (scope, bucket), record


class _DealBucketFn(beam.DoFn):
    """Sorts one (scope, bucket) of images in no group, and gives each its split by its rank in its scope."""

    def __init__(self, weights, stratify):
        self._weights = weights
        self._stratify = stratify
        self._mover = _Mover()
        self._sides = self._starts = self._placed = None

    @staticmethod
    def bucket_starts(bucket_counts):
        """(scope, bucket) -> rank of the bucket's first image in its scope."""
        starts: dict[tuple[str, int], int] = {}
        running: collections.Counter[str] = collections.Counter()
        for scope, bucket in sorted(bucket_counts):
            starts[(scope, bucket)] = running[scope]
            running[scope] += bucket_counts[(scope, bucket)]
        return starts

    def process(self, keyed_bucket, before, after):
        if self._sides is None or self._sides[0] is not before or self._sides[1] is not after:
            # side inputs are the same objects all bundle long
            self._sides = (before, after)
            self._starts = self.bucket_starts(_buckets(after))
            # where the published images stay, and where the groups went
            self._placed = _in_splits({**before, **after}, (_PUBLISHED, _PLACED))
        (scope, bucket), records = keyed_bucket
        assert self._starts is not None and self._placed is not None  # set above from the side inputs
        start = self._starts[(scope, bucket)]
        targets = targets_for(before[Count(_SCOPE, scope)], self._weights, self._stratify)
        there = self._placed.get(scope, {})
        quotas = singleton_quotas(targets, there, before[Count(_FREE, scope)], self._weights)
        for position, record in enumerate(sorted(records, key=lambda r: deal_key(r.source))):
            dealt, moves = self._mover.place(record, split_of_rank(start + position, quotas, self._weights))
            yield from moves
            yield dealt


class DealSplits(beam.PTransform):
    """{'records': every RecordRef, 'groups': (group, [Member, ...])} -> {'records': every RecordRef with its final
    split, GROUPS: the groups with their members' final splits, MOVES: (Tally(LISTED, split), -1) and
    (Tally(LISTED, split), +1) for every record whose split is not its hash's}.

    ``weights``: ((name, weight), ...); ``stratify``: a class is a scope; ``keep_published``: records'
    ``published_split`` is final (a previous version with the same splits, no --resplit). ``group_of``: when the
    groups are dealt together, the side input that names each grouped image's group (``group_name``). The groups
    are dealt as their Members; a record crosses no step more for its group: where the others are keyed to be
    dealt by rank, it takes its group's split.
    """

    def __init__(self, weights, stratify=False, keep_published=False, group_of=None):
        super().__init__()
        self._weights = tuple(weights)
        self._stratify = stratify
        self._keep_published = keep_published
        self._group_of = group_of

    def _scope(self):
        return (lambda record: record.label) if self._stratify else (lambda record: WHOLE)

    def expand(self, inputs):
        records, groups = inputs['records'], inputs['groups']
        scope, names, keep = self._scope(), {name for name, _ in self._weights}, self._keep_published
        together = () if self._group_of is None else (self._group_of,)
        sorted_out = records | 'SortOut' >> beam.ParDo(_SortOutFn(scope, names, keep), *together).with_outputs(
            _COUNTS, _KEPT, MOVES, main='free')
        placement = _Placement(self._weights, self._stratify, keep)
        # Beam would infer the tagged outputs into the main output's type: it is a (scope, GroupFacts) pair.
        facts = groups | 'GroupFacts' >> beam.FlatMap(placement.facts, scope).with_output_types(
            typing.Tuple[typing.Any, GroupFacts]).with_outputs(_COUNTS, main='facts')
        before = beam.pvalue.AsDict((sorted_out[_COUNTS], facts[_COUNTS])
                                    | 'AllBefore' >> beam.Flatten()
                                    | 'CountBefore' >> beam.CombinePerKey(sum))
        split_of = beam.pvalue.AsDict(facts.facts
                                      | 'GroupsOfScope' >> beam.GroupByKey()
                                      | 'DealGroups' >> beam.ParDo(_DealScopeFn(self._weights, self._stratify),
                                                                   before))
        # Beam would infer the tagged outputs into the main output's type: it is a (name, [Member]) pair.
        dealt_groups = groups | 'PlaceGroups' >> beam.ParDo(
            _PlaceGroupFn(placement, scope, self._stratify), split_of).with_output_types(
                typing.Tuple[typing.Any, typing.Any]).with_outputs(_COUNTS, main='groups')
        # Beam would infer the tagged outputs into the main output's type: it is a (key, record) pair.
        keyed = sorted_out.free | 'KeyByBucket' >> beam.ParDo(
            _KeyByBucketFn(scope), before, *((split_of, *together) if together else ())).with_output_types(
                typing.Tuple[typing.Any, typing.Any]).with_outputs(_COUNTS, _GROUPED, MOVES, main='keyed')
        after = beam.pvalue.AsDict((keyed[_COUNTS], dealt_groups[_COUNTS])
                                   | 'AllAfter' >> beam.Flatten()
                                   | 'CountAfter' >> beam.CombinePerKey(sum))
        dealt = (keyed.keyed
                 | 'GroupBuckets' >> beam.GroupByKey()
                 | 'DealSingletons' >> beam.ParDo(_DealBucketFn(self._weights, self._stratify), before,
                                                  after).with_outputs(MOVES, main='records'))
        return {
            'records': ((keyed[_GROUPED], dealt.records, sorted_out[_KEPT]) | 'AllDealt' >> beam.Flatten()),
            GROUPS: dealt_groups.groups,
            MOVES: ((keyed[MOVES], dealt[MOVES], sorted_out[MOVES]) | 'AllMoves' >> beam.Flatten()),
        }
