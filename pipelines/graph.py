"""The build job's graph: labelled images -> balanced, deterministic TFRecord shards + dataset.json.

Only light records cross the shuffles: each image's Example is appended to a spill file as soon as it
is encoded, and the shard writers copy it from there by reference (``RecordRef``).
"""
import apache_beam as beam

from contract import layout
from transforms.decode import CountDecisions, DecodeResizeEncode
from transforms.dedupe import Dedupe
from transforms.examples import ToExample
from transforms.index import WriteIndex
from transforms.labels import ResolveLabels
from transforms.listing import ListImages
from transforms.publication import Latest
from transforms.publish import Publish
from transforms.quarantine import Quarantine
from transforms.sharding import AssignBalancedShards
from transforms.splits import AssignSplit
from transforms.write import INDEX_ROWS, WriteShards


def build_pipeline(pipeline, config):
    """Adds the build's transforms to ``pipeline``; returns the one-element PCollection of dataset.json."""
    listed = pipeline | 'ListImages' >> ListImages(input_root=config.input, manifest=config.manifest)
    resolved = listed['images'] | 'ResolveLabels' >> ResolveLabels(config.labels)
    labels = beam.pvalue.AsSingleton(resolved['labels'])
    images = resolved['images'] | 'AssignSplit' >> AssignSplit(config.splits)
    decoded = (images
               | 'Reshuffle' >> beam.Reshuffle()
               | 'DecodeResize' >> DecodeResizeEncode(config.image_size, config.resize, config.jpeg_quality,
                                                      config.max_pixels, config.min_size))
    records = decoded['images'] | 'ToExample' >> ToExample(
        labels, layout.join(config.staging_dir, layout.SPILL_DIR))
    deduped = records | 'Dedupe' >> Dedupe()
    sharded = deduped['images'] | 'AssignShards' >> AssignBalancedShards(
        [name for name, _ in config.splits], labels, config.shard_config())
    written = sharded['assigned'] | 'WriteShards' >> WriteShards(config.staging_dir, sharded['shard_counts'])
    index_parts = written[INDEX_ROWS] | 'WriteIndex' >> WriteIndex(config.staging_dir)
    rejected = ((listed['rejected'], resolved['rejected'], decoded['rejected'], deduped['rejected'])
                | 'Quarantine' >> Quarantine())
    listed_per_split = (images
                        | 'SplitOf' >> beam.Map(lambda ref: (ref.split, 1))
                        | 'CountPerSplit' >> beam.CombinePerKey(sum))
    ignored = listed['ignored'] | 'CountIgnored' >> beam.combiners.Count.Globally()
    return written['stats'] | 'Publish' >> Publish(
        config.output, config.version, config.staging_dir, config.previous or Latest(),
        {'name': config.name, 'created': config.created, 'options': config.describe(),
         'image_size': config.image_size},
        labels=resolved['labels'], listed_per_split=listed_per_split, ignored=ignored, rejected=rejected,
        duplicates=deduped['duplicates'], decisions=deduped['images'] | 'CountDecisions' >> CountDecisions(),
        index_parts=index_parts, max_error_rate=config.max_error_rate)
