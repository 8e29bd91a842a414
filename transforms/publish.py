"""Checks the accounting, then writes labels.txt, quarantine.jsonl, dataset.json and, last, LATEST.

Runs on the gathered per-shard stats, so it starts only after every shard is written: a reader that
follows LATEST never sees a half-written version.
"""
import collections
import json

import apache_beam as beam

from contract import layout, metadata
from transforms import storage
from transforms.errors import BuildFailed


def account(shard_stats, listed_per_split, rejected):
    """Checks every listed input was written or rejected; returns (per split counts, total counts).

    ``rejected`` items without a split were refused before split assignment (bad manifest lines,
    unknown classes).
    """
    written = collections.Counter()
    for stats in shard_stats:
        written[stats['split']] += stats['records']
    rejected_per_split = collections.Counter(item.split for item in rejected)
    per_split = {}
    for split in sorted(set(listed_per_split) | set(written)):
        listed = listed_per_split.get(split, 0)
        if listed != written[split] + rejected_per_split[split]:
            raise BuildFailed(f'accounting error in split {split!r}: {listed} listed, but {written[split]} '
                              f'written and {rejected_per_split[split]} quarantined')
        per_split[split] = {'inputs': listed, 'written': written[split], 'quarantined': rejected_per_split[split]}
    totals = {
        'inputs': sum(listed_per_split.values()) + rejected_per_split[''],
        'written': sum(written.values()),
        'quarantined': len(rejected),
    }
    return per_split, totals


def top_reasons(rejected, limit=3):
    counts = collections.Counter(item.reason for item in rejected)
    return ', '.join(f'{reason} ({n})' for reason, n in counts.most_common(limit))


class _PublishFn(beam.DoFn):
    def __init__(self, output, version, describe):
        self._output = output
        self._version = version
        self._describe = describe  # name, created, options, image_size

    def process(self, shard_stats, labels, listed_per_split, ignored, rejected):
        rejected = sorted(rejected, key=lambda item: (item.source, item.reason))
        per_split, totals = account(shard_stats, listed_per_split, rejected)
        if totals['written'] == 0:
            raise BuildFailed(f"no image was written: {totals['inputs']} input(s), {ignored} non-image file(s) "
                              f"ignored, {totals['quarantined']} quarantined ({top_reasons(rejected) or 'none'})")
        version_dir = layout.join(self._output, self._version)
        splits = {}
        for stats in sorted(shard_stats, key=lambda s: (s['split'], s['index'])):
            split = splits.setdefault(stats['split'], {'shards': [], 'class_counts': collections.Counter()})
            split['shards'].append({'file': stats['file'], 'records': stats['records'], 'bytes': stats['bytes']})
            for label, n in stats['label_counts'].items():
                split['class_counts'][labels[label]] += n
        for name, split in splits.items():
            split['inputs'] = per_split.get(name, {}).get('inputs', 0)
            split['quarantined'] = per_split.get(name, {}).get('quarantined', 0)
        document = metadata.build_metadata(
            version=self._version, labels=labels, splits=splits,
            counts=dict(totals, ignored=ignored),
            quarantine={'file': layout.QUARANTINE_JSONL,
                        'by_reason': dict(sorted(collections.Counter(r.reason for r in rejected).items()))},
            **self._describe)
        storage.write_bytes(layout.join(version_dir, layout.LABELS_TXT), ''.join(f'{l}\n' for l in labels).encode())
        storage.write_bytes(layout.join(version_dir, layout.QUARANTINE_JSONL), ''.join(
            json.dumps(item._asdict(), ensure_ascii=False, sort_keys=True) + '\n' for item in rejected).encode())
        storage.write_bytes(layout.join(version_dir, layout.DATASET_JSON), metadata.dumps(document).encode())
        storage.replace(layout.join(self._output, layout.LATEST), f'{self._version}\n'.encode())
        yield document


class Publish(beam.PTransform):
    """Per-shard stats -> the dataset.json document, once written with LATEST pointing at it.

    Side inputs: ``labels`` (singleton list), ``listed_per_split`` (PCollection of (split, count)),
    ``ignored`` (singleton count) and ``rejected`` (Rejected items).
    """

    def __init__(self, output, version, describe, *, labels, listed_per_split, ignored, rejected):
        super().__init__()
        self._fn = _PublishFn(output, version, describe)
        self._sides = (beam.pvalue.AsSingleton(labels), beam.pvalue.AsDict(listed_per_split),
                       beam.pvalue.AsSingleton(ignored), beam.pvalue.AsList(rejected))

    def expand(self, shard_stats):
        return (shard_stats
                | 'GatherStats' >> beam.combiners.ToList()
                | 'WriteMetadata' >> beam.ParDo(self._fn, *self._sides))
