"""The build job's graph: labelled images -> balanced, deterministic TFRecord shards + dataset.json.

Only light records cross the shuffles: each image's Example is appended to a spill file as soon as it
is encoded, and the shard writers copy it from there by reference (``RecordRef``). On a refresh, the
records of unchanged images are references into the previous version's shards: nothing is read or
decoded for them (``imgrec.transforms.previous``). From the listing's stage to the end of encoding, and into
``Dedupe``, images cross Beam in batches (``imgrec.transforms.encode``); per image, only what a per-image key is
for crosses a shuffle alone (a content key to find copies, band keys to find near-duplicates), and the
shard dealing. Decoding also hashes each image (a perceptual hash), and
``NearDuplicates`` keeps each group of near-duplicates in one split before the shards are dealt
(``imgrec.transforms.near_duplicates``).
"""
import collections

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from imgrec.contract import counters, index as I, layout
from imgrec.storage.latest import Latest
from imgrec.pipelines.refresh import label_order
from imgrec.pipelines.refresh_plan import RefreshPlan
from imgrec.transforms.constants import Value
from imgrec.transforms.decode import CountDecisions
from imgrec.transforms.dedupe import Dedupe
from imgrec.transforms.elements import DECODED, IGNORED, LISTED, UPSCALED, ImageRef, Tally
from imgrec.transforms.encode import Encode, batched
from imgrec.transforms.labels import ResolveLabels
from imgrec.transforms.listing import IgnoredByExtension, ListImages
from imgrec.transforms.near_duplicate_candidates import PERCEPTUAL
from imgrec.transforms.near_duplicates import OFF, NearDuplicates
from imgrec.transforms.previous import (COUNTS, REJECTED, REUSED, TO_DECODE, MatchPrevious, PreviousConflicts,
                                        ReadPrevious, ReuseCheck, nothing_changed)
from imgrec.transforms.published import WithPublishedSplits
from imgrec.transforms.publish import Publish, PublishInputs
from imgrec.transforms.quarantine import Quarantine
from imgrec.transforms.resumed import RESUMED, ReadStopped, TakeUp
from imgrec.transforms.sharding import AssignBalancedShards
from imgrec.transforms.splits import MOVES, AssignSplit
from imgrec.transforms.write import INDEX_ROWS, WriteShards
from imgrec.transforms.write_index import WriteIndex


def _encode(config, facts, labels, staging_dir, storage):
    return Encode(config.record_options, labels, layout.join(staging_dir, layout.SPILL_DIR), storage,
                  with_hash=config.near_duplicates != OFF and config.near_duplicate_check == PERCEPTUAL,
                  with_digest=config.near_duplicates != OFF, decoders=facts.decoders)


def _keys(config):
    """The index columns this build's near-duplicate check keys records by: a reused record must have them."""
    if config.near_duplicates == OFF:
        return ()
    return (I.PERCEPTUAL_HASH,) if config.near_duplicate_check == PERCEPTUAL else (I.ENCODED_SHA256,)


def _image_ref(record):
    return ImageRef(record.path, record.source, record.label_text, record.split, record.source_size,
                    record.mtime_ns, record.generation, record.ctime_ns, record.inode)


class _TallyPerBundleFn(beam.DoFn):
    """Elements -> (Tally, count) pairs, summed in each bundle and given once at its end: pairs an image would
    be written out and read back whole through the Flatten before the sum (Beam's local runner materialises a
    Flatten of several inputs), and each worker keeps the buffer of each stage's largest output.
    ``tallies_of``: an element -> the (Tally, count) pairs it adds."""

    def __init__(self, tallies_of):
        self._tallies_of = tallies_of
        self._counts = collections.Counter()

    def start_bundle(self):
        self._counts = collections.Counter()

    def process(self, element):
        for tally, count in self._tallies_of(element):
            self._counts[tally] += count

    def finish_bundle(self):
        counts, self._counts = self._counts, collections.Counter()
        for tally, count in counts.items():
            yield GlobalWindows.windowed_value((tally, count))


def _tally(tallies_of):
    return beam.ParDo(_TallyPerBundleFn(tallies_of))


def _one(kind):
    return lambda _: ((Tally(kind), 1),)


def build_pipeline(pipeline, config, facts):
    """Adds the build of ``config`` (a BuildConfig) to ``pipeline``, as the run ``facts`` (RunFacts) say;
    returns the one-element PCollection of dataset.json."""
    refresh = facts.refresh or RefreshPlan()
    staging_dir = facts.staging_dir(config)
    # The job's options go with it: a worker's gs:// client authenticates as the job does.
    assert facts.destination is not None  # made once, before the job (launcher.prepare)
    storage = facts.destination.storage  # also lists the input: handed on to its path (Storage.for_path)
    listed = pipeline | counters.LIST_IMAGES >> ListImages(input_root=config.input, manifest=config.manifest,
                                                   storage=storage)
    resolved = listed['images'] | 'ResolveLabels' >> ResolveLabels(
        config.labels, allow_unknown_labels=config.allow_unknown_labels, keep=refresh.keep_labels)
    labels = beam.pvalue.AsSingleton(resolved['labels'])
    images = resolved['images'] | 'AssignSplit' >> AssignSplit(config.splits)
    rejected = [listed['rejected'], resolved['rejected']]
    previous = None
    if refresh.incremental:
        previous = pipeline | 'ReadPrevious' >> ReadPrevious(refresh.reuse_dir, refresh.document, _keys(config))
        matched = images | counters.MATCH_PREVIOUS >> MatchPrevious(previous, labels, storage)
        to_decode, reused, counts = matched[TO_DECODE], [matched[REUSED]], matched[COUNTS]
        rejected.append(matched[REJECTED])
    else:
        to_decode, reused = images, []
        counts = pipeline | 'NothingReused' >> Value({'new': None, 'changed': None, 'removed': None, 'reused': 0})
    if refresh.stopped:  # a rerun of a build stopped part way: what it spilled whole is taken up, not decoded
        stopped = pipeline | 'ReadStopped' >> ReadStopped(refresh.resume_from, config.record_options.image_size, storage)
        taken = to_decode | 'TakeUp' >> TakeUp(stopped, labels, storage)
        to_decode = taken[TO_DECODE]
        reused.append(taken[RESUMED])
        counts = counts | 'WithResumed' >> beam.Map(
            lambda found, resumed, stopped: {**found, 'resumed': {**stopped, **resumed}},
            beam.pvalue.AsSingleton(taken['counts']), refresh.describe()['resumed'])
    encoded = to_decode | counters.ENCODE >> _encode(config, facts, labels, staging_dir, storage)
    rejected.append(encoded['rejected'])
    # Records reach Dedupe in batches, as encoding leaves them; reused ones are batched where they are matched.
    reused = [records | f'BatchReused{i}' >> batched() for i, records in enumerate(reused)]
    deduped = [encoded['records'], *reused] | 'AllRecords' >> beam.Flatten() | counters.DEDUPE >> Dedupe()
    rejected.append(deduped['rejected'])
    kept, decode_inputs = deduped['images'], [to_decode]
    if refresh.incremental:
        # A previous duplicate whose twin is gone is the copy kept now: it is decoded after all.
        promoted = (kept | 'WithoutFrame' >> beam.Filter(lambda r: r.payload_file is None)
                    | 'AsImageRef' >> beam.Map(_image_ref))
        encoded_promoted = promoted | 'EncodePromoted' >> _encode(config, facts, labels, staging_dir, storage)
        rejected.append(encoded_promoted['rejected'])
        kept = ((kept | 'WithFrame' >> beam.Filter(lambda r: r.payload_file is not None),
                 encoded_promoted['records'] | 'PromotedRecords' >> beam.FlatMap(lambda batch: batch))
                | 'AllKept' >> beam.Flatten())
        decode_inputs.append(promoted)
    if refresh.keeps_published:  # a refresh and a --full build read the published splits alike
        if previous is None or refresh.published_dir != refresh.reuse_dir:
            previous = pipeline | 'ReadPublished' >> ReadPrevious(refresh.published_dir, refresh.published_document)
        kept = kept | 'PublishedSplits' >> WithPublishedSplits(previous)
    # Near-duplicates found and kept together (or listed), and every image dealt: its split is final after this.
    # A refresh counts the images its previous version quarantined as near-duplicate label conflicts that it writes.
    before_dir, before_document = ((refresh.reuse_dir, refresh.document) if refresh.incremental
                                   else (refresh.published_dir, refresh.published_document))
    conflicts_before = (pipeline | 'PreviousConflicts' >> PreviousConflicts(before_dir, before_document)
                        if before_dir else None)
    near = kept | counters.NEAR_DUPLICATES >> NearDuplicates(
        config.near_duplicates, config.splits, config.stratify, keep_published=refresh.keeps_published,
        tolerance=config.split_tolerance, staging_dir=staging_dir, storage=storage,
        conflicts=config.near_duplicate_conflicts, conflicts_before=conflicts_before, check=config.near_duplicate_check)
    rejected.append(near['rejected'])
    sharded = near['records'] | counters.ASSIGN_SHARDS >> AssignBalancedShards(
        [name for name, _ in config.splits], labels, config.shard_config())
    reusable = refresh.incremental and refresh.same_options and not config.force
    unchanged = counts | 'NothingChanged' >> beam.Map(nothing_changed, reusable, refresh.keep_labels, labels)
    written = sharded['assigned'] | counters.WRITE_SHARDS >> WriteShards(
        staging_dir, sharded['shard_counts'], storage, beam.pvalue.AsSingleton(unchanged),
        array_record=layout.ARRAY_RECORD in config.formats,
        reuse_check=(ReuseCheck(refresh.reuse_dir, config.record_options, storage, refresh.stopped)
                     if refresh.incremental or refresh.stopped else None))
    index_parts = written[INDEX_ROWS] | counters.WRITE_INDEX >> WriteIndex(staging_dir, storage)
    # The counts Publish reports, summed in one combine: the images listed in each split (as hashed, and
    # the moves of the dealing), and the decoded, upscaled and ignored ones. A full build decodes every
    # image listed: one step tells both.
    decodes_all = decode_inputs[0] is images
    tallies = ((images | 'SplitOf' >> _tally(
                    lambda ref: ((Tally(LISTED, ref.split), 1), (Tally(DECODED), 1)) if decodes_all
                    else ((Tally(LISTED, ref.split), 1),)),
                near[MOVES] | 'Moves' >> _tally(lambda move: (move,)),
                *[inputs | f'Decoded{i}' >> _tally(_one(DECODED)) for i, inputs in enumerate(decode_inputs)
                  if inputs is not images],
                kept | 'Upscaled' >> _tally(lambda record: ((Tally(UPSCALED), 1),) if record.upscaled else ()),
                listed['ignored'] | 'Ignored' >> _tally(_one(IGNORED)))
               | 'AllTallies' >> beam.Flatten()
               | 'Tally' >> beam.CombinePerKey(sum))
    return written['stats'] | counters.PUBLISH >> Publish(PublishInputs(
        output=facts.destination, version=config.version, staging_dir=staging_dir, previous=facts.previous or Latest(),
        describe={'name': config.name, 'created': facts.created, 'options': config.describe(),
                  'record_options': config.record_options.recorded(),
                  'label_order': label_order(config, refresh)},
        refresh=refresh.describe(), keep_versions=config.keep_versions, max_error_rate=config.max_error_rate,
        tallies=tallies, rejected=tuple(rejected) | 'Quarantine' >> Quarantine(),
        duplicates=deduped['duplicates'], unchanged=unchanged, labels=resolved['labels'],
        decisions=kept | 'CountDecisions' >> CountDecisions(), index_parts=index_parts, refresh_counts=counts,
        near_rows=near['near_duplicates'], near_summary=near['summary'],
        ignored_files=listed['ignored'] | 'IgnoredByExtension' >> IgnoredByExtension()))
