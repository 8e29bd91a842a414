"""A refresh: matches the listing with the previous version, so unchanged images are neither read nor
decoded.

Every input of the previous version is known by its source, size and modification time (local) or
generation (``gs://``): written ones from the record index, quarantined and duplicate ones from
``quarantine.jsonl`` and ``duplicates.jsonl``. A listed image whose source, size, stamp and class are
the same as then keeps its fate:
- a written record is reused: its frame is copied from the previous shard by offset;
- a quarantined one (for what decoding found) is quarantined again, for the same reason;
- a duplicate goes to Dedupe by its sha256, without bytes; only if it is the copy kept this time (its
  twin is gone) is it decoded (``payload_file`` None).
Every other listed image is new or changed and is decoded. The Example bytes depend only on the source
bytes, the record-shaping options (the same, or there is no refresh) and the label (stable), so what
is reused is byte for byte what decoding would give.
"""
import json

import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import index as I, layout
from contract.reasons import CORRUPT, EMPTY, NOT_AN_IMAGE, TOO_MANY_PIXELS, TOO_SMALL, TRUNCATED, UNSUPPORTED_FORMAT
from transforms.elements import RecordRef, Rejected

REUSED, REJECTED, TO_DECODE, COUNTS = 'reused', 'rejected', 'to_decode', 'counts'
WRITTEN, QUARANTINED, DUPLICATE = 'written', 'quarantined', 'duplicate'
# What decoding found in the bytes: the same bytes give the same verdict (the options are the same).
# A read error is tried again; a label conflict is a fate of Dedupe, decided again from the sha256s.
DECODING_VERDICTS = frozenset((EMPTY, NOT_AN_IMAGE, UNSUPPORTED_FORMAT, TOO_MANY_PIXELS, TOO_SMALL, TRUNCATED,
                               CORRUPT))


def _written(row, version_dir, labels):
    return row[I.SOURCE], (WRITTEN, {
        'size': row[I.SOURCE_SIZE], 'stamp': (row[I.SOURCE_MTIME_NS], row[I.SOURCE_GENERATION]),
        'label': labels[row[I.LABEL]], 'sha256': row[I.SHA256],
        'decisions': tuple(filter(None, (row[I.DECISIONS] or '').split(','))),
        'payload': (layout.join(version_dir, row[I.SHARD]), row[I.OFFSET], row[I.LENGTH])})


def _quarantined(line):
    item = json.loads(line)
    if item.get('reason') not in DECODING_VERDICTS:
        return []
    return [(item['source'], (QUARANTINED, {
        'size': item['bytes'], 'stamp': (item.get('mtime_ns'), item.get('generation')),
        'label': item.get('label'), 'reason': item['reason'], 'message': item['message']}))]


def _duplicate(line):
    item = json.loads(line)
    return item['source'], (DUPLICATE, {
        'size': item['bytes'], 'stamp': (item.get('mtime_ns'), item.get('generation')),
        'label': item['label'], 'sha256': item['sha256']})


def nothing_changed(counts, reusable, keep_labels, labels):
    """Whether a build would publish what the previous version already is: nothing new, changed or
    removed, and the same labels. ``reusable``: an incremental build with the previous version's options,
    not forced (known before the job runs, so only it and the label order go into the graph, not the
    previous dataset.json)."""
    return (reusable and tuple(labels) == keep_labels
            and counts['new'] == counts['changed'] == counts['removed'] == 0)


class ReadPrevious(beam.PTransform):
    """PBegin -> (source, (fate, facts)) for every input of the previous version that had a fate."""

    def __init__(self, version_dir, document):
        super().__init__()
        self._version_dir = version_dir
        self._files = list(document['index']['files'])
        self._labels = list(document['labels'])
        self._quarantine = document['quarantine']['file']
        self._duplicates = document['duplicates']['file']

    def expand(self, pbegin):
        version_dir, labels = self._version_dir, self._labels
        written = (pbegin
                   | 'IndexFiles' >> beam.Create([layout.join(version_dir, name) for name in self._files])
                   | 'ReadIndex' >> beam.io.ReadAllFromParquet()
                   | 'Written' >> beam.Map(_written, version_dir, labels))
        quarantined = (pbegin
                       | 'ReadQuarantine' >> beam.io.ReadFromText(layout.join(version_dir, self._quarantine))
                       | 'Quarantined' >> beam.FlatMap(_quarantined))
        duplicates = (pbegin
                      | 'ReadDuplicates' >> beam.io.ReadFromText(layout.join(version_dir, self._duplicates))
                      | 'Duplicates' >> beam.Map(_duplicate))
        return (written, quarantined, duplicates) | 'AllFates' >> beam.Flatten()


def _unchanged(ref, facts):
    return (ref.size == facts['size'] and (ref.mtime_ns, ref.generation) == tuple(facts['stamp'])
            and ref.label == facts['label'])


class _MatchFn(beam.DoFn):
    def __init__(self):
        self.reused = Metrics.counter('refresh', 'images_reused')
        self.to_decode = Metrics.counter('refresh', 'images_to_decode')
        self._labels = self._index_of = None

    def process(self, grouped, labels):
        if labels is not self._labels:  # the side input is the same object for a whole bundle
            self._labels, self._index_of = labels, {label: i for i, label in enumerate(labels)}
        source, joined = grouped
        listed, previous = list(joined['listed']), list(joined['previous'])
        if not listed:
            yield beam.pvalue.TaggedOutput(COUNTS, ('removed', len(previous)))
            return
        # One listing of the source and one previous fate: the usual case. A manifest that lists a path
        # twice is simply decoded again.
        if len(listed) == 1 and len(previous) == 1 and _unchanged(listed[0], previous[0][1]):
            ref, (fate, facts) = listed[0], previous[0]
            self.reused.inc()
            yield beam.pvalue.TaggedOutput(COUNTS, ('reused', 1))
            if fate == QUARANTINED:
                yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
                    ref.source, facts['reason'], facts['message'], facts['size'], ref.split, ref.label,
                    ref.mtime_ns, ref.generation))
                return
            payload = facts.get('payload', (None, 0, 0))
            yield beam.pvalue.TaggedOutput(REUSED, RecordRef(
                source=ref.source, path=ref.path, label_text=ref.label, split=ref.split,
                label=self._index_of[ref.label], sha256=facts['sha256'],
                source_size=facts['size'], mtime_ns=ref.mtime_ns, generation=ref.generation,
                decisions=facts.get('decisions', ()), payload_file=payload[0], payload_offset=payload[1],
                payload_length=payload[2]))
            return
        yield beam.pvalue.TaggedOutput(COUNTS, ('changed' if previous else 'new', len(listed)))
        for ref in listed:
            self.to_decode.inc()
            yield ref


class MatchPrevious(beam.PTransform):
    """ImageRef (split assigned) -> {'to_decode': ImageRef, 'reused': RecordRef, 'rejected': Rejected,
    'counts': one {'new', 'changed', 'removed', 'reused': n} dict}.

    ``previous`` is ReadPrevious's output; ``labels`` the singleton side input of the class list.
    """

    def __init__(self, previous, labels):
        super().__init__()
        self._previous = previous
        self._labels = labels

    def expand(self, images):
        listed = images | 'KeyBySource' >> beam.Map(lambda ref: (ref.source, ref))
        matched = ({'listed': listed, 'previous': self._previous}
                   | 'JoinBySource' >> beam.CoGroupByKey()
                   | 'Match' >> beam.ParDo(_MatchFn(), self._labels).with_outputs(
                       REUSED, REJECTED, COUNTS, main=TO_DECODE))
        counts = (matched[COUNTS]
                  | 'SumCounts' >> beam.CombinePerKey(sum)
                  | 'AsDict' >> beam.combiners.ToDict()
                  | 'AllKinds' >> beam.Map(lambda found: {kind: found.get(kind, 0)
                                                          for kind in ('new', 'changed', 'removed', 'reused')}))
        return {TO_DECODE: matched[TO_DECODE], REUSED: matched[REUSED], REJECTED: matched[REJECTED],
                COUNTS: counts}
