"""Checks the accounting and the error rate, then writes the version's files and, last, LATEST.

Runs on the gathered per-shard stats, so it starts only after every shard is written: a reader that
follows LATEST never sees a half-written version, and a build that fails a check never moves LATEST.
"""
import collections
import json

import apache_beam as beam

from contract import layout, metadata
from inspection import report, tfds_metadata
from transforms import image_ops, storage
from transforms.errors import BuildFailed
from transforms.records import NOT_ERRORS


def account(shard_stats, listed_per_split, rejected, duplicates):
    """Checks images listed = written + quarantined + duplicates, per split and in total.

    Returns (per split counts, total counts). ``rejected`` items without a split were refused before
    split assignment (bad manifest lines, unknown classes): they count in the total only, so the total
    holds whenever every split does.
    """
    written = collections.Counter()
    for stats in shard_stats:
        written[stats['split']] += stats['records']
    quarantined = collections.Counter(item.split for item in rejected)
    duplicated = collections.Counter(item.split for item in duplicates)
    per_split = {}
    for split in sorted((set(listed_per_split) | set(written) | set(quarantined) | set(duplicated)) - {''}):
        listed = listed_per_split.get(split, 0)
        if listed != written[split] + quarantined[split] + duplicated[split]:
            raise BuildFailed(f'accounting error in split {split!r}: {listed} listed, but {written[split]} written, '
                              f'{quarantined[split]} quarantined and {duplicated[split]} duplicates')
        per_split[split] = {'inputs': listed, 'written': written[split], 'quarantined': quarantined[split],
                            'duplicates': duplicated[split]}
    totals = {
        'inputs': sum(listed_per_split.values()) + quarantined[''],
        'written': sum(written.values()),
        'quarantined': len(rejected),
        'duplicates': len(duplicates),
    }
    return per_split, totals


def top_reasons(rejected, limit=3):
    """'truncated (4), corrupt (2), empty (1)': the commonest reasons, ties by name."""
    counts = collections.Counter(item.reason for item in rejected)
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return ', '.join(f'{reason} ({n})' for reason, n in ranked[:limit])


def check_error_rate(totals, rejected, max_error_rate, quarantine_path):
    """Raises BuildFailed when more of the input was quarantined for errors than ``max_error_rate``."""
    errors = [item for item in rejected if item.reason not in NOT_ERRORS]
    if totals['inputs'] and len(errors) / totals['inputs'] > max_error_rate:
        raise BuildFailed(f"{len(errors)} of {totals['inputs']} input images quarantined "
                          f"({len(errors) / totals['inputs']:.1%}), over --max_error_rate {max_error_rate:.1%}; "
                          f'top reasons: {top_reasons(errors)}; LATEST not updated; see {quarantine_path}')


def jsonl(items):
    """One JSON object a line, fields sorted: the bytes depend on the items only."""
    return ''.join(json.dumps(item._asdict(), ensure_ascii=False, sort_keys=True) + '\n' for item in items).encode()


class _PublishFn(beam.DoFn):
    def __init__(self, output, version, describe, max_error_rate):
        self._output = output
        self._version = version
        self._describe = describe  # name, created, options, image_size
        self._max_error_rate = max_error_rate

    def process(self, shard_stats, labels, listed_per_split, ignored, rejected, duplicates, decisions):
        rejected = sorted(rejected, key=lambda item: (item.source, item.reason))
        duplicates = sorted(duplicates)
        per_split, totals = account(shard_stats, listed_per_split, rejected, duplicates)
        version_dir = layout.join(self._output, self._version)
        quarantine_path = layout.join(version_dir, layout.QUARANTINE_JSONL)
        storage.write_bytes(quarantine_path, jsonl(rejected))  # first, so a failed build can be diagnosed
        check_error_rate(totals, rejected, self._max_error_rate, quarantine_path)
        if totals['written'] == 0:
            raise BuildFailed(f"no image was written: {totals['inputs']} input(s), {ignored} non-image file(s) "
                              f"ignored, {totals['quarantined']} quarantined ({top_reasons(rejected) or 'none'})")
        splits = {}
        for stats in sorted(shard_stats, key=lambda s: (s['split'], s['index'])):
            split = splits.setdefault(stats['split'], {'shards': [], 'class_counts': collections.Counter()})
            split['shards'].append({'file': stats['file'], 'records': stats['records'], 'bytes': stats['bytes']})
            for label, n in stats['label_counts'].items():
                split['class_counts'][labels[label]] += n
        for name, split in splits.items():
            for key in ('inputs', 'quarantined', 'duplicates'):
                split[key] = per_split.get(name, {}).get(key, 0)
        document = metadata.build_metadata(
            version=self._version, labels=labels, splits=splits,
            counts=dict(totals, ignored=ignored),
            quarantine={'file': layout.QUARANTINE_JSONL,
                        'by_reason': dict(sorted(collections.Counter(r.reason for r in rejected).items()))},
            duplicates={'file': layout.DUPLICATES_JSONL, 'count': len(duplicates)},
            decoding={'background': list(image_ops.BACKGROUND), 'decisions': dict(sorted(decisions.items()))},
            **self._describe)
        storage.write_bytes(layout.join(version_dir, layout.LABELS_TXT), ''.join(f'{l}\n' for l in labels).encode())
        storage.write_bytes(layout.join(version_dir, layout.DUPLICATES_JSONL), jsonl(duplicates))
        storage.write_bytes(layout.join(version_dir, layout.DATASET_JSON), metadata.dumps(document).encode())
        tfds_metadata.write(version_dir, document)  # TFDS metadata (issue 11)
        report.write_report(version_dir, report.seconds_since(document['created']))  # report (issue 11)
        storage.replace(layout.join(self._output, layout.LATEST), f'{self._version}\n'.encode())
        yield document


class Publish(beam.PTransform):
    """Per-shard stats -> the dataset.json document, once written with LATEST pointing at it.

    Side inputs: ``labels`` (singleton list), ``listed_per_split`` (PCollection of (split, count)),
    ``ignored`` (singleton count), ``rejected`` (Rejected items), ``duplicates`` (Duplicate items) and
    ``decisions`` (singleton {decision: count} of the written images). Fails the build, before LATEST,
    when the accounting does not add up or more than ``max_error_rate`` of the inputs were quarantined.
    Quarantined and duplicate items are gathered here, on one worker: the first are bounded by
    ``max_error_rate``, the second take ~200 bytes each.
    """

    def __init__(self, output, version, describe, *, labels, listed_per_split, ignored, rejected, duplicates,
                 decisions, max_error_rate):
        super().__init__()
        self._fn = _PublishFn(output, version, describe, max_error_rate)
        self._sides = (beam.pvalue.AsSingleton(labels), beam.pvalue.AsDict(listed_per_split),
                       beam.pvalue.AsSingleton(ignored), beam.pvalue.AsList(rejected),
                       beam.pvalue.AsList(duplicates), beam.pvalue.AsSingleton(decisions))

    def expand(self, shard_stats):
        return (shard_stats
                | 'GatherStats' >> beam.combiners.ToList()
                | 'WriteMetadata' >> beam.ParDo(self._fn, *self._sides))
