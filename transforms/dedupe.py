"""Finds inputs with the same bytes (sha256 of the source file) and keeps one copy, deterministically.

Same bytes under one label: the copy with the smallest source name is written, the others are recorded
as duplicates. Same bytes under several labels: nobody can tell which label is right, so every copy is
quarantined as ``label_conflict``. Records are grouped by their sha256 (a keyed GroupByKey of light
references, so only the copies of one file meet on a worker, and no image bytes move).
"""
import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import counters
from contract.reasons import LABEL_CONFLICT
from transforms.elements import Duplicate, Rejected

REJECTED = 'rejected'
DUPLICATES = 'duplicates'
_NAMES_IN_MESSAGE = 5


def _others(members, source):
    """'a/x.jpg (a), b/y.jpg (b)': the other copies, the first few by name."""
    others = [f'{name} ({label})' for name, label in members if name != source]
    shown = ', '.join(others[:_NAMES_IN_MESSAGE])
    return shown + (f' and {len(others) - _NAMES_IN_MESSAGE} more' if len(others) > _NAMES_IN_MESSAGE else '')


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
                    ref.source_size, ref.split, ref.label_text))
            elif ref.source == kept_source and not kept:  # a manifest may list one path twice
                kept = True
                yield ref
            else:
                self.duplicates.inc()
                yield beam.pvalue.TaggedOutput(DUPLICATES, Duplicate(
                    ref.source, kept_source, ref.label_text, sha256, ref.source_size, ref.split, ref.mtime_ns,
                    ref.generation, ref.ctime_ns, ref.inode))


class Dedupe(beam.PTransform):
    """RecordRef -> {'images': one RecordRef per content, 'duplicates': Duplicate, 'rejected': Rejected}."""

    def expand(self, records):
        results = (records
                   | 'KeyBySha256' >> beam.Map(lambda record: (record.sha256, record))
                   | 'GroupCopies' >> beam.GroupByKey()
                   | 'ResolveCopies' >> beam.ParDo(_ResolveCopiesFn()).with_outputs(
                       REJECTED, DUPLICATES, main='images'))
        return {'images': results.images, DUPLICATES: results[DUPLICATES], REJECTED: results[REJECTED]}
