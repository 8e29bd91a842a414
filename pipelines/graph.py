"""The build job's graph: labelled images -> balanced, deterministic TFRecord shards + dataset.json.

Only light records cross the shuffles: each image's Example is appended to a spill file as soon as it
is encoded, and the shard writers copy it from there by reference (``RecordRef``). On a refresh, the
records of unchanged images are references into the previous version's shards: nothing is read or
decoded for them (``transforms.previous``).
"""
import apache_beam as beam

from contract import layout
from imgrec_storage.publication import Latest
from pipelines.refresh import RefreshPlan, label_order, record_options
from transforms.decode import CountDecisions
from transforms.dedupe import Dedupe
from transforms.elements import ImageRef
from transforms.encode import Encode
from transforms.index import WriteIndex
from transforms.labels import ResolveLabels
from transforms.listing import ListImages
from transforms.previous import COUNTS, REJECTED, REUSED, TO_DECODE, MatchPrevious, ReadPrevious, nothing_changed
from transforms.publish import Publish
from transforms.quarantine import Quarantine
from transforms.sharding import AssignBalancedShards
from transforms.splits import AssignSplit
from transforms.write import INDEX_ROWS, WriteShards


def _encode(config, labels):
    return Encode(config.image_size, config.resize, config.jpeg_quality, config.max_pixels, config.min_size, labels,
                  layout.join(config.staging_dir, layout.SPILL_DIR), config.retry_policy())


def _image_ref(record):
    return ImageRef(record.path, record.source, record.label_text, record.split, record.source_size,
                    record.mtime_ns, record.generation)


def _count():
    """A count that is empty, not 0, for no input: Publish reads it with 0 for default, and the runner
    runs no extra stage to make the 0."""
    return beam.combiners.Count.Globally().without_defaults()


def build_pipeline(pipeline, config):
    """Adds the build's transforms to ``pipeline``; returns the one-element PCollection of dataset.json."""
    refresh = config.refresh or RefreshPlan()
    policy = config.retry_policy()
    listed = pipeline | 'ListImages' >> ListImages(input_root=config.input, manifest=config.manifest,
                                                   retry_policy=policy)
    resolved = listed['images'] | 'ResolveLabels' >> ResolveLabels(
        config.labels, allow_unknown_labels=config.allow_unknown_labels, keep=refresh.keep_labels)
    labels = beam.pvalue.AsSingleton(resolved['labels'])
    images = resolved['images'] | 'AssignSplit' >> AssignSplit(config.splits)
    rejected = [listed['rejected'], resolved['rejected']]
    if refresh.incremental:
        previous = pipeline | 'ReadPrevious' >> ReadPrevious(refresh.reuse_dir, refresh.document)
        matched = images | 'MatchPrevious' >> MatchPrevious(previous, labels)
        to_decode, reused, counts = matched[TO_DECODE], [matched[REUSED]], matched[COUNTS]
        rejected.append(matched[REJECTED])
    else:
        to_decode, reused = images, []
        counts = pipeline | 'NothingReused' >> beam.Create([{'new': None, 'changed': None, 'removed': None,
                                                              'reused': 0}])
    encoded = to_decode | 'Encode' >> _encode(config, labels)
    rejected.append(encoded['rejected'])
    deduped = [encoded['records'], *reused] | 'AllRecords' >> beam.Flatten() | 'Dedupe' >> Dedupe()
    rejected.append(deduped['rejected'])
    kept, decode_inputs = deduped['images'], [to_decode]
    if refresh.incremental:
        # A previous duplicate whose twin is gone is the copy kept now: it is decoded after all.
        promoted = (kept | 'WithoutFrame' >> beam.Filter(lambda r: r.payload_file is None)
                    | 'AsImageRef' >> beam.Map(_image_ref))
        encoded_promoted = promoted | 'EncodePromoted' >> _encode(config, labels)
        rejected.append(encoded_promoted['rejected'])
        kept = ((kept | 'WithFrame' >> beam.Filter(lambda r: r.payload_file is not None),
                 encoded_promoted['records']) | 'AllKept' >> beam.Flatten())
        decode_inputs.append(promoted)
    decoded_count = decode_inputs | 'AllDecoded' >> beam.Flatten() | 'CountDecoded' >> _count()
    sharded = kept | 'AssignShards' >> AssignBalancedShards(
        [name for name, _ in config.splits], labels, config.shard_config())
    reusable = refresh.incremental and refresh.same_options and not config.force
    unchanged = counts | 'NothingChanged' >> beam.Map(nothing_changed, reusable, refresh.keep_labels, labels)
    written = sharded['assigned'] | 'WriteShards' >> WriteShards(
        config.staging_dir, sharded['shard_counts'], policy, beam.pvalue.AsSingleton(unchanged))
    index_parts = written[INDEX_ROWS] | 'WriteIndex' >> WriteIndex(config.staging_dir, policy)
    listed_per_split = (images
                        | 'SplitOf' >> beam.Map(lambda ref: (ref.split, 1))
                        | 'CountPerSplit' >> beam.CombinePerKey(sum))
    ignored = listed['ignored'] | 'CountIgnored' >> _count()
    return written['stats'] | 'Publish' >> Publish(
        config.output, config.version, config.staging_dir, config.previous or Latest(),
        {'name': config.name, 'created': config.created, 'options': config.describe(),
         'image_size': config.image_size, 'record_options': record_options(config),
         'label_order': label_order(config, refresh)},
        labels=resolved['labels'], listed_per_split=listed_per_split, ignored=ignored,
        rejected=tuple(rejected) | 'Quarantine' >> Quarantine(), duplicates=deduped['duplicates'],
        decisions=kept | 'CountDecisions' >> CountDecisions(), index_parts=index_parts,
        refresh=(refresh.describe(), counts, decoded_count, unchanged), keep_versions=config.keep_versions,
        max_error_rate=config.max_error_rate, retry_policy=policy)
