"""Finds inputs with the same bytes (sha256 of the source file) and keeps one copy, deterministically.

Same bytes under one label: the copy with the smallest source name is written, the others are recorded
as duplicates. Same bytes under several labels: nobody can tell which label is right, so every copy is
quarantined as ``label_conflict``.

Records come in batches (lists) and most have no copy, so only a number per image crosses a shuffle: the
first 60 bits of its sha256, counted per value by a combine that sums inside each worker first (Beam's
combiner lifting). The values held more than once (a side input as small as the copies are few) pick
out the records that may have a copy; only those are grouped by their whole sha256 (a shared prefix
alone decides nothing), so only the copies of one file meet on a worker, and no image bytes move. Every
other record leaves its batch as it is.
"""
import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.contract.reasons import LABEL_CONFLICT
from imgrec.transforms.elements import Duplicate, Rejected

REJECTED = 'rejected'
DUPLICATES = 'duplicates'
_COPIES = 'copies'
_NAMES_IN_MESSAGE = 5


def _others(members, source):
    """'a/x.jpg (a), b/y.jpg (b)': the other copies, the first few by name."""
    others = [f'{name} ({label})' for name, label in members if name != source]
    shown = ', '.join(others[:_NAMES_IN_MESSAGE])
    return shown + (f' and {len(others) - _NAMES_IN_MESSAGE} more' if len(others) > _NAMES_IN_MESSAGE else '')


def content_key(sha256):
    """The first 60 bits of a hex sha256, as a number: what is counted to find the contents held twice
    (within a signed 64-bit integer, which Beam's coders encode as a varint)."""
    return int(sha256[:15], 16)


def _content_keys(batch):
    return [(content_key(record.sha256), 1) for record in batch]


def _sort_out(batch, repeated):
    """A batch -> its records one by one; those whose content key is held twice, keyed by sha256."""
    for record in batch:
        if content_key(record.sha256) in repeated:
            yield beam.pvalue.TaggedOutput(_COPIES, (record.sha256, record))
        else:
            yield record


class _ResolveCopiesFn(beam.DoFn):
    def __init__(self):
        self.duplicates = Metrics.counter(*counters.DUPLICATES)
        self.conflicts = Metrics.counter(*counters.LABEL_CONFLICTS)

    def process(self, keyed_records):
        sha256, records = keyed_records
        records = list(records)
        members = sorted((record.source, record.label_text) for record in records)
        if len(members) == 1:
            yield from records
            return
        kept_source = members[0][0]
        conflict = len({label for _, label in members}) > 1
        kept = False
        for ref in records:
            if conflict:
                self.conflicts.inc()
                yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
                    ref.source, LABEL_CONFLICT, f'same bytes as {_others(members, ref.source)}',
                    ref.source_size, ref.split, ref.label_text, ref.mtime_ns, ref.generation, ref.ctime_ns,
                    ref.inode))
            elif ref.source == kept_source and not kept:  # a manifest may list one path twice
                kept = True
                yield ref
            else:
                self.duplicates.inc()
                yield beam.pvalue.TaggedOutput(DUPLICATES, Duplicate(
                    ref.source, kept_source, ref.label_text, sha256, ref.source_size, ref.split, ref.mtime_ns,
                    ref.generation, ref.ctime_ns, ref.inode))


class Dedupe(beam.PTransform):
    """Lists of RecordRef -> {'images': one RecordRef per content, 'duplicates': Duplicate, 'rejected':
    Rejected}."""

    def expand(self, batches):
        repeated = beam.pvalue.AsDict(
            batches
            | 'ContentKeys' >> beam.FlatMap(_content_keys)
            | 'CountPerContent' >> beam.CombinePerKey(sum)
            | 'HeldTwice' >> beam.Filter(lambda counted: counted[1] > 1))
        sorted_out = batches | 'SortOut' >> beam.FlatMap(_sort_out, repeated).with_outputs(_COPIES, main='alone')
        results = (sorted_out[_COPIES]
                   | 'GroupCopies' >> beam.GroupByKey()
                   | 'ResolveCopies' >> beam.ParDo(_ResolveCopiesFn()).with_outputs(
                       REJECTED, DUPLICATES, main='images'))
        images = (sorted_out.alone, results.images) | 'AllImages' >> beam.Flatten()
        return {'images': images, DUPLICATES: results[DUPLICATES], REJECTED: results[REJECTED]}
