"""Checks the accounting and the error rate, writes the version's metadata, then publishes it.

Runs on the gathered per-shard and per-index-part stats, so it starts only after every shard and the
index are written. Everything is written into the staging folder; publishing deletes the spill files,
makes the staging folder its version (dataset.json last) and moves LATEST, then prunes
(``imgrec_storage.publication``, docs/publication.md). A reader that follows LATEST never sees a
half-written version, and a build that fails a check never moves LATEST.
"""
import collections
import json

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

from contract import counters, index, layout, metadata
from contract.reasons import NOT_ERRORS
from imgrec_console.errors import BuildFailed
from imgrec_imaging import image_ops
from imgrec_storage import fileio, publication
from imgrec_versions import report, tfds_metadata
from imgrec_versions.version import Version


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
    return ranked_reasons(collections.Counter(item.reason for item in rejected), limit)


def ranked_reasons(by_reason, limit=3):
    """``top_reasons`` of the counts {reason: inputs} (dataset.json's ``quarantine.by_reason``)."""
    ranked = sorted(by_reason.items(), key=lambda pair: (-pair[1], pair[0]))
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


# The versions --keep_versions deleted, and those it kept because a reader holds a lease on them: Beam
# string sets, which the summary names (``pruning``).
VERSIONS_PRUNED = ('publish', 'versions_pruned')
VERSIONS_IN_USE = ('publish', 'versions_in_use')


def pruning(result):
    """(versions pruned, versions kept in use), each sorted, from a finished PipelineResult."""
    found = []
    for namespace, name in (VERSIONS_PRUNED, VERSIONS_IN_USE):
        names = set()
        query = result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name))
        for metric in query.get('string_sets', ()):
            names |= set(metric.committed if metric.committed is not None else metric.attempted or ())
        found.append(sorted(names))
    return tuple(found)


class _PublishFn(beam.DoFn):
    def __init__(self, output, version, staging_dir, previous, describe, max_error_rate, refresh, keep_versions,
                 policy):
        self._output = output
        self._version = version
        self._staging_dir = staging_dir
        self._previous = previous  # publication.Latest: what LATEST held when the build started
        self._describe = describe  # name, created, options, record_options, label_order
        self._max_error_rate = max_error_rate
        self._refresh = refresh  # RefreshPlan.describe(): previous, mode, full_reason
        self._keep_versions = keep_versions
        self._policy = policy  # retries.RetryPolicy of every write
        self.unchanged = Metrics.counter(*counters.UNCHANGED)
        self.pruned = Metrics.string_set(*VERSIONS_PRUNED)
        self.in_use = Metrics.string_set(*VERSIONS_IN_USE)

    def process(self, _, shard_stats, labels, listed_per_split, tallies, rejected, duplicates, decisions, index_parts,
                refresh_counts, unchanged, near_duplicates, near_summary):
        ignored, decoded, upscaled = (tallies.get(name, 0) for name in (IGNORED, DECODED, UPSCALED))
        rejected = sorted(rejected, key=lambda item: (item.source, item.reason))
        duplicates = sorted(duplicates)
        per_split, totals = account(shard_stats, listed_per_split, rejected, duplicates)
        if unchanged:
            publication.discard(self._output, self._staging_dir, self._policy)
            self.unchanged.inc()
            return
        refresh = dict(self._refresh, decoded=decoded, **refresh_counts)
        # Frames of the previous version found damaged as they were copied were decoded again, not reused.
        damaged = sum(stats.get('reuse_damaged', 0) for stats in shard_stats)
        refresh.update(reused=refresh['reused'] - damaged, decoded=decoded + damaged, reuse_damaged=damaged)
        staging = self._staging_dir
        quarantine_path = layout.join(staging, layout.QUARANTINE_JSONL)
        fileio.write_bytes(quarantine_path, jsonl(rejected), self._policy)  # first, so a failed build can be diagnosed
        check_error_rate(totals, rejected, self._max_error_rate, quarantine_path)
        if totals['written'] == 0:
            raise BuildFailed(f"no image was written: {totals['inputs']} input(s), {ignored} non-image file(s) "
                              f"ignored, {totals['quarantined']} quarantined ({top_reasons(rejected) or 'none'})")
        splits = {}
        for stats in sorted(shard_stats, key=lambda s: (s['split'], s['index'])):
            split = splits.setdefault(stats['split'], {'shards': [], 'class_counts': collections.Counter()})
            metadata.add_shard(split, stats)  # its TFRecord shard, and its ArrayRecord shard if written
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
            decoding={'background': list(image_ops.BACKGROUND), 'decisions': dict(sorted(decisions.items())),
                      'upscaled': upscaled},
            near_duplicates=dict(near_summary, file=layout.NEAR_DUPLICATES_JSONL),
            index=index.describe([part['file'] for part in sorted(index_parts, key=lambda p: p['file'])],
                                 sum(part['rows'] for part in index_parts)),
            refresh=refresh, **self._describe)
        # Written side by side (each a round trip on gs://); their order does not matter: the staging folder
        # is published only once everything is in it.
        fileio.write_all({
            layout.join(staging, layout.LABELS_TXT): ''.join(f'{l}\n' for l in labels).encode(),
            layout.join(staging, layout.DUPLICATES_JSONL): jsonl(duplicates),
            layout.join(staging, layout.NEAR_DUPLICATES_JSONL):
                jsonl(sorted(near_duplicates, key=lambda row: (row.group, row.source))),
            layout.join(staging, layout.DATASET_JSON): metadata.dumps(document).encode(),
            **{layout.join(staging, name): data for name, data in tfds_metadata.files(document).items()},
        }, self._policy)
        report.write_report(staging, report.seconds_since(document['created']),
                            Version(staging, document, list(labels)), self._policy,
                            report.pruning_plan(self._output, self._version, self._previous.version, self._keep_versions))
        pruned = publication.publish(self._output, self._version, staging, document, self._previous,
                                     self._keep_versions, self._policy)
        for version in pruned.deleted:
            self.pruned.add(version)
        for version in pruned.in_use:
            self.in_use.add(version)
        yield document


# The names of the counts Publish takes as one side input of (name, count) pairs (``tallies``).
IGNORED, DECODED, UPSCALED = 'ignored', 'decoded', 'upscaled'


class Publish(beam.PTransform):
    """Per-shard stats -> the dataset.json document, once published with LATEST pointing at it.

    ``previous`` is the ``publication.Latest`` read when the build started: LATEST moves only if it still
    holds it. Side inputs:
    - ``labels`` (singleton list), ``listed_per_split`` ((split, count)), ``tallies`` ((name, count) for
      IGNORED, DECODED and UPSCALED, each summed once; a name not there is 0);
    - ``rejected`` (Rejected) and ``duplicates`` (Duplicate), gathered here on one worker: the first are
      bounded by ``max_error_rate``, the second take ~200 bytes each;
    - ``decisions`` ((decision, count) of the written images), ``index_parts`` ({'file', 'rows'});
    - ``refresh``: (``RefreshPlan.describe()``, singleton of its counts, singleton of
      ``previous.nothing_changed``);
    - ``near_duplicates``: (NearDuplicate rows, one a written image in a group, gathered here like the
      duplicates; singleton of the near-duplicates summary).
    Fails the build, before LATEST, when the accounting does not add up or more than ``max_error_rate``
    of the inputs were quarantined. Publishes nothing when nothing changed since the previous version,
    and prunes to ``keep_versions`` once LATEST has moved: the versions deleted and those kept because a
    reader uses them are the string sets VERSIONS_PRUNED and VERSIONS_IN_USE (``pruning``).
    """

    def __init__(self, output, version, staging_dir, previous, describe, *, labels, listed_per_split, tallies,
                 rejected, duplicates, decisions, index_parts, refresh, keep_versions, max_error_rate,
                 near_duplicates, retry_policy=None):
        super().__init__()
        described, counts, unchanged = refresh
        near_rows, near_summary = near_duplicates
        self._fn_args = (output, version, staging_dir, previous, describe, max_error_rate, described, keep_versions,
                         retry_policy)
        self._sides = (beam.pvalue.AsSingleton(labels), beam.pvalue.AsDict(listed_per_split),
                       beam.pvalue.AsDict(tallies), beam.pvalue.AsList(rejected),
                       beam.pvalue.AsList(duplicates), beam.pvalue.AsDict(decisions),
                       beam.pvalue.AsList(index_parts), beam.pvalue.AsSingleton(counts),
                       beam.pvalue.AsSingleton(unchanged),
                       beam.pvalue.AsList(near_rows), beam.pvalue.AsSingleton(near_summary))

    def expand(self, shard_stats):
        # One element, run once every side input is complete: the stats gathered as a side input cost the
        # graph one step, where a ToList costs nine (graph construction is most of a small build's start).
        return (shard_stats.pipeline
                | 'Once' >> beam.Impulse()
                | 'WriteMetadata' >> beam.ParDo(_PublishFn(*self._fn_args), beam.pvalue.AsList(shard_stats),
                                                *self._sides))
