"""Assigns each image to a split: by a stable hash of its source name, or stratified by class.

The hash, not the listing order, decides the split, so an image keeps its split when the dataset is
rebuilt with more or fewer images.

``--stratify`` deals each class instead: a class of ``n`` images gives each split its share of ``n``
(``apportion``: largest remainders), within one image, or within one group of near-duplicates where
groups are kept together (``transforms.near_duplicates``). Groups are dealt first, one class at a time
(``deal_groups``); the images in no group then fill what each split still lacks (``singleton_quotas``):
they are ranked inside their class by a salted hash of their source, and the ranks are cut into one
run a split. Ranking needs no class gathered on one worker: like the shards (``transforms.sharding``),
images are bucketed by the top bits of their hash, and a rank is the count of the class's images in
earlier buckets (a small side input) plus the position inside the bucket. A stratified split depends
on every image of the class, so adding images can move others: it is off by default.
"""
import collections

import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import counters
from contract.hashing import stable_hash
from transforms.sharding import bucket_of

_SALT = 'split'
_STRATIFY_SALT = 'stratify'
MOVES = 'moves'


def split_for(source, weights):
    """The split of ``source`` for ``weights``: an ordered sequence of (split name, integer weight)."""
    point = stable_hash(_SALT, source) % sum(weight for _, weight in weights)
    for name, weight in weights:
        if point < weight:
            return name
        point -= weight
    raise AssertionError('unreachable: point is below the total weight')


class AssignSplit(beam.PTransform):
    """ImageRef -> the same ImageRef with its ``split`` set."""

    def __init__(self, weights):
        super().__init__()
        self._weights = tuple(weights)

    def expand(self, refs):
        weights = self._weights
        return refs | 'SetSplit' >> beam.Map(lambda ref: ref._replace(split=split_for(ref.source, weights)))


def stratify_key(source):
    """(salted hash, source): the order in which a class's images are dealt."""
    return stable_hash(_STRATIFY_SALT, source), source


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


def deal_groups(groups, class_size, weights):
    """Deals one class's groups to splits: {group: split}.

    ``groups`` holds (order key, group, images of the class in it); each goes, in order, to the split
    that lacks most of its share of ``class_size`` (the first named on a tie). A split is only given a
    group while it lacks at least one image, so it ends over its share by less than one group.
    """
    targets = apportion(class_size, weights)
    given = dict.fromkeys(targets, 0)
    names = [name for name, _ in weights]
    decided = {}
    for _, group, size in sorted(groups):
        split = max(names, key=lambda name: (targets[name] - given[name], -names.index(name)))
        decided[group] = split
        given[split] += size
    return decided


def singleton_quotas(class_size, singletons, grouped, weights):
    """{split: count} of a class's images in no group that each split gets.

    ``grouped`` is {split: images of the class already there in groups}. Each split is filled up to its
    share of ``class_size``; when groups already hold more than a split's share, the images left over are
    apportioned by what the others still lack.
    """
    targets = apportion(class_size, weights)
    lacking = [(name, max(0, targets[name] - grouped.get(name, 0))) for name, _ in weights]
    if sum(need for _, need in lacking) == singletons:
        return dict(lacking)
    return apportion(singletons, lacking)


def split_of_rank(rank, quotas, weights):
    """The split of the ``rank``-th (from 0) image of a class: the ranks are cut into one run a split,
    in the order of ``weights``."""
    for name, _ in weights:
        if rank < quotas[name]:
            return name
        rank -= quotas[name]
    raise AssertionError(f'rank beyond the class: {rank} left')


class _DealBucketFn(beam.DoFn):
    """Sorts one (label, bucket) of singletons and gives each its split by its rank in its class."""

    def __init__(self, weights):
        self._weights = weights
        self.moved = Metrics.counter(*counters.IMAGES_STRATIFIED)
        self._sides = self._starts = None

    @staticmethod
    def bucket_starts(bucket_counts):
        """(label, bucket) -> rank of the bucket's first image in its class."""
        starts, running = {}, collections.Counter()
        for label, bucket in sorted(bucket_counts):
            starts[(label, bucket)] = running[label]
            running[label] += bucket_counts[(label, bucket)]
        return starts

    def process(self, keyed_bucket, bucket_counts, class_sizes, singleton_counts, grouped):
        if self._sides is not bucket_counts:  # side inputs are the same objects all bundle long
            self._sides, self._starts = bucket_counts, self.bucket_starts(bucket_counts)
        (label, bucket), records = keyed_bucket
        start = self._starts[(label, bucket)]
        in_groups = {split: n for (group_label, split), n in grouped.items() if group_label == label}
        quotas = singleton_quotas(class_sizes[label], singleton_counts[label], in_groups, self._weights)
        for position, record in enumerate(sorted(records, key=lambda r: stratify_key(r.source))):
            split = split_of_rank(start + position, quotas, self._weights)
            if split != record.split:
                self.moved.inc()
                yield beam.pvalue.TaggedOutput(MOVES, (record.split, -1))
                yield beam.pvalue.TaggedOutput(MOVES, (split, 1))
            yield record._replace(split=split)


class StratifySingletons(beam.PTransform):
    """RecordRef in no group -> the same with its stratified split; {'records', 'moves'}.

    ``class_sizes``: AsDict side input {label: images of the class, grouped or not}; ``grouped``: AsDict
    side input {(label, split): images of the class that groups put in the split}. ``moves`` holds
    (split, -1) and (split, +1) for every record whose split changed, for the accounting.
    """

    def __init__(self, weights, class_sizes, grouped):
        super().__init__()
        self._weights = tuple(weights)
        self._class_sizes = class_sizes
        self._grouped = grouped

    def expand(self, records):
        singleton_counts = beam.pvalue.AsDict(
            records | 'KeyByLabel' >> beam.Map(lambda r: (r.label, 1)) | 'CountPerLabel' >> beam.CombinePerKey(sum))
        keyed = records | 'KeyByBucket' >> beam.Map(
            lambda r, counts: ((r.label, bucket_of(stratify_key(r.source)[0], counts[r.label])), r),
            singleton_counts)
        bucket_counts = beam.pvalue.AsDict(
            keyed | 'BucketKeys' >> beam.Map(lambda kv: (kv[0], 1)) | 'CountPerBucket' >> beam.CombinePerKey(sum))
        dealt = (keyed
                 | 'GroupBuckets' >> beam.GroupByKey()
                 | 'Deal' >> beam.ParDo(_DealBucketFn(self._weights), bucket_counts, self._class_sizes,
                                        singleton_counts, self._grouped).with_outputs(MOVES, main='records'))
        return {'records': dealt.records, MOVES: dealt[MOVES]}
