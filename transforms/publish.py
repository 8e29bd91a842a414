"""Publication in five steps, each a DoFn handing one ``publication.Publication`` summary to the next:
account for every image, write the metadata and the report, promote, move LATEST, prune.

Runs on the gathered per-shard and per-index-part stats, so it starts only after every shard and the
index are written. Everything is written into the staging folder; promotion deletes the spill files and
makes the staging folder its version (dataset.json last), then LATEST moves and older versions are
pruned (``imgrec.storage.promotion``, docs/publication.md). A reader that follows LATEST never sees a
half-written version, and a build that fails a check never moves LATEST. Every step may run again (a
retried bundle): each ends in the same published state.
"""
from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

from imgrec.contract import counters, index, layout, metadata
from imgrec.contract.reasons import NOT_ERRORS
from imgrec.console.errors import BuildFailed
from imgrec.imaging import image_ops
from imgrec.storage import promotion, publication
from imgrec.storage.crash_points import crash_point
from imgrec.storage.latest import Latest
from imgrec.storage.output import Output
from imgrec.storage.retention import Kept, Retention
from imgrec.transforms.elements import DECODED, IGNORED, LISTED, UPSCALED, Tally
from imgrec.versions import failed_build, tfds_metadata
from imgrec.versions.report import facts as report_facts, page as report_page
from imgrec.versions.version import Version


def account(shard_stats: Iterable[Mapping[str, Any]], listed_per_split: Mapping[str, int], rejected: Sequence[Any],
            duplicates: Sequence[Any]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Checks images listed = written + quarantined + duplicates, per split and in total.

    Returns (per split counts, total counts). ``rejected`` items without a split were refused before
    split assignment (bad manifest lines, unknown classes): they count in the total only, so the total
    holds whenever every split does.
    """
    written: collections.Counter[str] = collections.Counter()
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


def top_reasons(rejected: Iterable[Any], limit: int = 3) -> str:
    """'truncated (4), corrupt (2), empty (1)': the commonest reasons, ties by name."""
    return ranked_reasons(collections.Counter(item.reason for item in rejected), limit)


def ranked_reasons(by_reason: Mapping[str, int], limit: int = 3) -> str:
    """``top_reasons`` of the counts {reason: inputs} (dataset.json's ``quarantine.by_reason``)."""
    ranked = sorted(by_reason.items(), key=lambda pair: (-pair[1], pair[0]))
    return ', '.join(f'{reason} ({n})' for reason, n in ranked[:limit])


def check_error_rate(totals: Mapping[str, int], rejected: Iterable[Any], max_error_rate: float,
                     quarantine_path: str) -> None:
    """Raises BuildFailed when more of the input was quarantined for errors than ``max_error_rate``."""
    errors = [item for item in rejected if item.reason not in NOT_ERRORS]
    if totals['inputs'] and len(errors) / totals['inputs'] > max_error_rate:
        raise BuildFailed(f"{len(errors)} of {totals['inputs']} input images quarantined "
                          f"({len(errors) / totals['inputs']:.1%}), over --max_error_rate {max_error_rate:.1%}; "
                          f'top reasons: {top_reasons(errors)}; LATEST not updated; see {quarantine_path}')


def jsonl(items: Iterable[Any]) -> bytes:
    """One JSON object a line, fields sorted: the bytes depend on the items only."""
    return ''.join(json.dumps(item._asdict(), ensure_ascii=False, sort_keys=True) + '\n' for item in items).encode()


# What pruning kept and deleted (a retention.Retention, as JSON) and whether an earlier run of the same
# command had published the version: Beam metrics, which the summary reads (``retention``, ``earlier_run``).
RETENTION = ('publish', 'retention')
EARLIER_RUN = ('publish', 'earlier_run')


def _string_set(result: Any, namespace: str, name: str) -> set[str]:
    found: set[str] = set()
    for metric in result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name)).get(
            'string_sets', ()):
        found |= set(metric.committed if metric.committed is not None else metric.attempted or ())
    return found


def retention(result: Any) -> Retention | None:
    """What --keep_versions kept and deleted, from a finished PipelineResult (None: no pruning ran)."""
    found = sorted(_string_set(result, *RETENTION))
    if not found:
        return None
    recorded = json.loads(found[-1])
    return Retention(recorded['keep_versions'],
                     tuple(Kept(version, why) for version, why in recorded['kept']),
                     tuple(recorded['deleted']))


def earlier_run(result: Any) -> bool:
    """Whether the build found its version published by an earlier run of the same command (and so
    published nothing of its own), from a finished PipelineResult."""
    return bool(_string_set(result, *EARLIER_RUN))


class _Account(beam.DoFn):
    """Step 1: every listed image written, quarantined or a duplicate, and the error rate within
    ``max_error_rate``. A build that fails here writes quarantine.jsonl into its staging folder, to be
    diagnosed, and publishes nothing. Writes nothing else: it may run again at any time."""

    def __init__(self, start: publication.Publication, max_error_rate: float) -> None:
        self._start = start  # the build's Publication, before anything is known
        self._max_error_rate = max_error_rate
        self.unchanged = Metrics.counter(*counters.UNCHANGED)

    def process(self, _: Any, shard_stats: Sequence[Mapping[str, Any]], tallies: Mapping[Tally, int],
                rejected: Sequence[Any], duplicates: Sequence[Any],
                unchanged: bool) -> Iterator[publication.Publication]:
        listed_per_split = {key.split: count for key, count in tallies.items() if key.kind == LISTED}
        rejected = sorted(rejected, key=lambda item: (item.source, item.reason))
        duplicates = sorted(duplicates)
        per_split, totals = account(shard_stats, listed_per_split, rejected, duplicates)
        if unchanged:
            self.unchanged.inc()
            yield dataclasses.replace(self._start, unchanged=True)
            return
        quarantine_path = layout.join(self._start.staging_dir, layout.QUARANTINE_JSONL)
        ignored = tallies.get(Tally(IGNORED), 0)
        facts = {'counts': dict(totals, ignored=ignored), 'splits': per_split}  # for a failed build's report
        try:
            with failed_build.known(self._start.staging_dir, facts, self._start.storage):
                check_error_rate(totals, rejected, self._max_error_rate, quarantine_path)
                if totals['written'] == 0:
                    raise BuildFailed(f"no image was written: {totals['inputs']} input(s), {ignored} non-image "
                                      f"file(s) ignored, {totals['quarantined']} quarantined "
                                      f"({top_reasons(rejected) or 'none'})")
        except BuildFailed:
            self._start.storage.write(quarantine_path, jsonl(rejected))
            raise
        yield dataclasses.replace(self._start, accounting=publication.Accounting(
            tuple(sorted(shard_stats, key=lambda s: (s['split'], s['index']))), per_split, totals, tuple(rejected),
            tuple(duplicates), ignored, tallies.get(Tally(DECODED), 0), tallies.get(Tally(UPSCALED), 0)))


class _WriteMetadata(beam.DoFn):
    """Step 2: dataset.json and the files beside it (labels, quarantine, duplicates, near-duplicates,
    TFDS's metadata), then the report, into the staging folder. Written whole again when run again,
    unless the version was promoted already (a retried bundle): then only the summary is rebuilt."""

    def __init__(self, describe: Mapping[str, Any], refresh: Mapping[str, Any]) -> None:
        self._describe = describe  # name, created, options, record_options, label_order
        self._refresh = refresh  # RefreshPlan.describe(): previous, mode, full_reason

    def _document(self, accounting: publication.Accounting, version: str, labels: Sequence[str],
                  decisions: Mapping[str, int], index_parts: Sequence[Mapping[str, Any]],
                  refresh_counts: Mapping[str, Any], near_summary: Mapping[str, Any],
                  ignored_files: Mapping[str, Any]) -> dict[str, Any]:
        shard_stats, per_split, rejected = accounting.shard_stats, accounting.per_split, accounting.rejected
        refresh = dict(self._refresh, decoded=accounting.decoded, **refresh_counts)
        # Frames of the previous version found damaged as they were copied were decoded again, not reused.
        damaged = sum(stats.get('reuse_damaged', 0) for stats in shard_stats)
        refresh.update(reused=refresh['reused'] - damaged, decoded=accounting.decoded + damaged,
                       reuse_damaged=damaged)
        splits: dict[str, dict[str, Any]] = {}
        for stats in shard_stats:
            split = splits.setdefault(stats['split'], {'shards': [], 'class_counts': collections.Counter()})
            metadata.add_shard(split, stats)  # its TFRecord shard, and its ArrayRecord shard if written
            for label, n in stats['label_counts'].items():
                split['class_counts'][labels[label]] += n
        for name, split in splits.items():
            for key in ('inputs', 'quarantined', 'duplicates'):
                split[key] = per_split.get(name, {}).get(key, 0)
        return metadata.build_metadata(
            version=version, labels=labels, splits=splits,
            counts=dict(accounting.totals, ignored=accounting.ignored),
            quarantine={'file': layout.QUARANTINE_JSONL,
                        'by_reason': dict(sorted(collections.Counter(r.reason for r in rejected).items()))},
            duplicates={'file': layout.DUPLICATES_JSONL, 'count': len(accounting.duplicates)},
            decoding={'background': list(image_ops.BACKGROUND), 'decisions': dict(sorted(decisions.items())),
                      'upscaled': accounting.upscaled},
            near_duplicates=dict(near_summary, file=layout.NEAR_DUPLICATES_JSONL),
            index=index.describe([part['file'] for part in sorted(index_parts, key=lambda p: p['file'])],
                                 sum(part['rows'] for part in index_parts)),
            refresh=refresh, ignored_files=dict(ignored_files), **self._describe)

    def process(self, started: publication.Publication, labels: Sequence[str], decisions: Mapping[str, int],
                index_parts: Sequence[Mapping[str, Any]], refresh_counts: Mapping[str, Any],
                near_rows: Sequence[Any], near_summary: Mapping[str, Any],
                ignored_files: Mapping[str, Any]) -> Iterator[publication.Publication]:
        accounting, staging, storage = started.accounting, started.staging_dir, started.storage
        if started.unchanged or accounting is None:
            yield started
            return
        document = self._document(accounting, started.version, labels, decisions, index_parts, refresh_counts,
                                  near_summary, ignored_files)
        dataset_json = metadata.dumps(document).encode()
        written = dataclasses.replace(started, accounting=None, document=document, dataset_json=dataset_json)
        if promotion.published_by(written) is not None:
            yield written  # promoted already: the staging folder is gone, or going
            return
        # Written side by side (each a round trip on gs://); their order does not matter: the staging folder
        # is published only once everything is in it.
        storage.write_all({
            layout.join(staging, layout.QUARANTINE_JSONL): jsonl(accounting.rejected),
            layout.join(staging, layout.LABELS_TXT): ''.join(f'{l}\n' for l in labels).encode(),
            layout.join(staging, layout.DUPLICATES_JSONL): jsonl(accounting.duplicates),
            layout.join(staging, layout.NEAR_DUPLICATES_JSONL):
                jsonl(sorted(near_rows, key=lambda row: (row.group, row.source))),
            layout.join(staging, layout.DATASET_JSON): dataset_json,
            **{layout.join(staging, name): data for name, data in tfds_metadata.files(document).items()},
        })
        crash_point('metadata:after_files')
        # A report already there is this step's, run before (a retried bundle): its build time stands, so the
        # report is the same bytes again.
        seconds = report_page.recorded_build_seconds(staging, storage) or report_page.seconds_since(document['created'])
        report_page.write_report(staging, seconds, Version(staging, document, list(labels)), storage,
                                 report_facts.pruning_plan(started.output, started.version, started.keep_versions))
        yield written


class _Step(beam.DoFn):
    """One of the publication's own steps (``promotion.promote``, ``move_latest``, ``prune``)."""

    def __init__(self, step: Callable[[publication.Publication], publication.Publication]) -> None:
        self._step = step

    def process(self, started: publication.Publication) -> Iterator[publication.Publication]:
        yield self._step(started)


def publish_tfds_view(done: publication.Publication) -> publication.Publication:
    """After LATEST moved and pruning: the view that lets ``tfds.load(NAME, data_dir=OUT)`` find the newest
    version (``tfds_metadata.write_view``; idempotent, so a retried bundle writes none twice)."""
    if not done.unchanged:
        tfds_metadata.write_view(done.output, done.version)
    return done


class _Report(beam.DoFn):
    """The end: what pruning did and whether an earlier run had published the version, as metrics for the
    summary; the published dataset.json, when the build published one."""

    def __init__(self) -> None:
        self.retention = Metrics.string_set(*RETENTION)
        self.earlier_run = Metrics.string_set(*EARLIER_RUN)

    def process(self, done: publication.Publication) -> Iterator[Mapping[str, Any]]:
        if done.retention is not None:
            self.retention.add(json.dumps({'keep_versions': done.retention.keep_versions,
                                           'kept': [[kept.version, kept.why] for kept in done.retention.kept],
                                           'deleted': list(done.retention.deleted)}, sort_keys=True))
        if done.earlier_run:
            self.earlier_run.add(done.version)
        if done.document is not None and not done.earlier_run:
            yield done.document


@dataclasses.dataclass(frozen=True, eq=False)
class PublishInputs:
    """What ``Publish`` takes besides the per-shard stats it is applied to: the facts of the build, and the
    PCollections its steps read as side inputs (built in ``imgrec.pipelines.graph``).

    Facts: ``output`` (the ``Output``, as the job built it: its storage's retry policy and options, which
    every step uses); ``version`` and its ``staging_dir``; ``previous``, the ``Latest`` read when
    the build started: LATEST moves only if it still holds it; ``describe`` (name, created, options,
    record_options, label_order of dataset.json); ``refresh`` (``RefreshPlan.describe()``: previous, mode,
    full_reason); ``keep_versions``; ``max_error_rate``.

    Of the accounting: ``tallies``, (``Tally``, count) pairs summed once in one combine: the images listed
    in each split, and the ignored, decoded and upscaled ones (a key not there is 0); ``rejected``
    (Rejected) and ``duplicates`` (Duplicate), gathered on one worker: the first are bounded by
    ``max_error_rate``, the second take ~200 bytes each; ``unchanged``: singleton of
    ``previous.nothing_changed``.

    Of the metadata: ``labels`` (singleton list), ``decisions`` ((decision, count) of the written images),
    ``index_parts`` ({'file', 'rows'}), ``refresh_counts`` (singleton of the refresh's counts),
    ``near_rows`` (NearDuplicate rows, one a written image in a group, gathered like the duplicates) and
    ``near_summary`` (singleton of the near-duplicates summary), ``ignored_files`` (singleton of
    ``listing.IgnoredByExtension``).
    """
    output: Output
    version: str
    staging_dir: str
    previous: Latest
    describe: Mapping[str, Any]
    refresh: Mapping[str, Any]
    keep_versions: int | None
    max_error_rate: float
    tallies: beam.PCollection
    rejected: beam.PCollection
    duplicates: beam.PCollection
    unchanged: beam.PCollection
    labels: beam.PCollection
    decisions: beam.PCollection
    index_parts: beam.PCollection
    refresh_counts: beam.PCollection
    near_rows: beam.PCollection
    near_summary: beam.PCollection
    ignored_files: beam.PCollection


class Publish(beam.PTransform):
    """Per-shard stats -> the dataset.json document, once published with LATEST pointing at it.

    ``inputs``: a ``PublishInputs``, the build's facts and the side inputs each step reads.
    Fails the build, before LATEST, when the accounting does not add up or more than ``max_error_rate``
    of the inputs were quarantined. Publishes nothing when nothing changed since the previous version,
    and prunes to ``keep_versions`` once LATEST has moved (or stayed): the metrics RETENTION and
    EARLIER_RUN say what it did (``retention``, ``earlier_run``).
    """

    def __init__(self, inputs: PublishInputs) -> None:
        super().__init__()
        self._start = publication.Publication(inputs.output, inputs.version, inputs.staging_dir, inputs.previous,
                                              inputs.keep_versions)
        self._max_error_rate = inputs.max_error_rate
        self._describe, self._refresh = inputs.describe, inputs.refresh
        self._accounting = (beam.pvalue.AsDict(inputs.tallies),
                            beam.pvalue.AsList(inputs.rejected), beam.pvalue.AsList(inputs.duplicates),
                            beam.pvalue.AsSingleton(inputs.unchanged))
        self._metadata = (beam.pvalue.AsSingleton(inputs.labels), beam.pvalue.AsDict(inputs.decisions),
                          beam.pvalue.AsList(inputs.index_parts), beam.pvalue.AsSingleton(inputs.refresh_counts),
                          beam.pvalue.AsList(inputs.near_rows), beam.pvalue.AsSingleton(inputs.near_summary),
                          beam.pvalue.AsSingleton(inputs.ignored_files))

    def expand(self, shard_stats: beam.PCollection) -> beam.PCollection:
        # One element, run once every side input is complete: the stats gathered as a side input cost the
        # graph one step, where a ToList costs nine (graph construction is most of a small build's start).
        return (shard_stats.pipeline
                | 'Once' >> beam.Impulse()
                | 'Account' >> beam.ParDo(_Account(self._start, self._max_error_rate),
                                          beam.pvalue.AsList(shard_stats), *self._accounting)
                | 'WriteMetadata' >> beam.ParDo(_WriteMetadata(self._describe, self._refresh), *self._metadata)
                | 'Promote' >> beam.ParDo(_Step(promotion.promote))
                | 'MoveLatest' >> beam.ParDo(_Step(promotion.move_latest))
                | 'Prune' >> beam.ParDo(_Step(promotion.prune))
                | 'TfdsView' >> beam.ParDo(_Step(publish_tfds_view))
                | 'Summary' >> beam.ParDo(_Report()))
