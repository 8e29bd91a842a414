"""The build job: labelled images -> balanced, deterministic TFRecord shards + dataset.json.

    python -m pipelines.build_dataset --input DIR_OR_GS_PREFIX --output DIR_OR_GS_PREFIX [options]

Runs on the DirectRunner (multi-processing, one worker per core) unless ``--runner`` says otherwise.
"""
import logging
import os
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from contract import layout, metadata
from pipelines.options import UsageError, check_input, check_output, parse_args
from transforms import storage
from transforms.decode import CountDecisions, DecodeResizeEncode
from transforms.dedupe import Dedupe
from transforms.errors import build_failure_message
from transforms.examples import ToExample
from transforms.labels import ResolveLabels
from transforms.listing import ListImages
from transforms.publish import Publish
from transforms.quarantine import Quarantine
from transforms.sharding import AssignBalancedShards
from transforms.splits import AssignSplit
from transforms.write import WriteShards


def build_pipeline(pipeline, config):
    """Adds the build's transforms to ``pipeline``; returns the one-element PCollection of dataset.json."""
    listed = pipeline | 'ListImages' >> ListImages(input_root=config.input, manifest=config.manifest)
    resolved = listed['images'] | 'ResolveLabels' >> ResolveLabels(config.labels)
    labels = resolved['labels']
    images = resolved['images'] | 'AssignSplit' >> AssignSplit(config.splits)
    encoded = (images
               | 'Reshuffle' >> beam.Reshuffle()
               | 'DecodeResize' >> DecodeResizeEncode(config.image_size, config.resize, config.jpeg_quality,
                                                      config.max_pixels, config.min_size))
    deduped = encoded['images'] | 'Dedupe' >> Dedupe()
    examples = deduped['images'] | 'ToExample' >> ToExample(beam.pvalue.AsSingleton(labels))
    sharded = examples | 'AssignShards' >> AssignBalancedShards(
        [name for name, _ in config.splits], beam.pvalue.AsSingleton(labels),
        num_shards=config.num_shards or {}, target_shard_bytes=config.target_shard_mb * 1e6)
    written = sharded['assigned'] | 'WriteShards' >> WriteShards(config.version_dir, sharded['shard_counts'])
    rejected = ((listed['rejected'], resolved['rejected'], encoded['rejected'], deduped['rejected'])
                | 'Quarantine' >> Quarantine())
    listed_per_split = (images
                        | 'SplitOf' >> beam.Map(lambda ref: (ref.split, 1))
                        | 'CountPerSplit' >> beam.CombinePerKey(sum))
    ignored = listed['ignored'] | 'CountIgnored' >> beam.combiners.Count.Globally()
    return written | 'Publish' >> Publish(
        config.output, config.version,
        {'name': config.name, 'created': config.created, 'options': config.describe(),
         'image_size': config.image_size},
        labels=labels, listed_per_split=listed_per_split, ignored=ignored, rejected=rejected,
        duplicates=deduped['duplicates'], decisions=deduped['images'] | 'CountDecisions' >> CountDecisions(),
        max_error_rate=config.max_error_rate)


def pipeline_options(beam_args):
    """Beam options from the leftover arguments, defaulting to a multi-process DirectRunner."""
    options = PipelineOptions(beam_args)
    standard = options.view_as(StandardOptions)
    if standard.runner is None:
        standard.runner = 'DirectRunner'
    direct = options.view_as(DirectOptions)
    if standard.runner in ('DirectRunner', 'direct') and '--direct_running_mode' not in ' '.join(beam_args):
        direct.direct_running_mode = 'multi_processing'
        if not any(arg.startswith('--direct_num_workers') for arg in beam_args):
            direct.direct_num_workers = os.cpu_count() or 1
    return options


def run(argv=None):
    """Builds a dataset; returns (BuildConfig, PipelineResult). Raises UsageError, or the runner's error."""
    config, beam_args = parse_args(argv)
    check_input(config)
    check_output(config)
    pipeline = beam.Pipeline(options=pipeline_options(beam_args))
    build_pipeline(pipeline, config)
    result = pipeline.run()
    result.wait_until_finish()
    return config, result


def summary(config):
    """One line a split, read back from the published dataset.json."""
    document = metadata.loads(storage.read_bytes(layout.join(config.version_dir, layout.DATASET_JSON)))
    counts = document['counts']
    lines = [f"build-dataset: wrote {counts['written']} of {counts['inputs']} images to {config.version_dir} "
             f"({counts['quarantined']} quarantined, {counts['ignored']} non-image files ignored)"]
    for name, split in document['splits'].items():
        lines.append(f"  {name}: {split['num_examples']} examples in {split['num_shards']} shard(s)")
    return '\n'.join(lines)


def main(argv=None):
    logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')
    # The multi-process DirectRunner relays every worker's start-up warnings; they are not the user's.
    logging.getLogger('apache_beam.runners.portability.local_job_service').setLevel(logging.ERROR)
    try:
        config, _ = run(argv if argv is not None else sys.argv[1:])
    except UsageError as error:
        print(f'build-dataset: error: {error}', file=sys.stderr)
        return 2
    except Exception as error:  # a runner wraps our BuildFailed in its own exception types
        message = build_failure_message(error)
        if message is None:
            raise
        print(f'build-dataset: failed: {message}', file=sys.stderr)
        return 1
    print(summary(config))
    return 0


if __name__ == '__main__':
    sys.exit(main())
