"""The build job: labelled images -> balanced, deterministic TFRecord shards + dataset.json.

    python -m pipelines.build_dataset --input DIR_OR_GS_PREFIX --output DIR_OR_GS_PREFIX [options]

Runs on the DirectRunner (multi-processing, one worker per core) unless ``--runner`` says otherwise.
"""
import contextlib
import logging
import os
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import (DirectOptions, GoogleCloudOptions, PipelineOptions, SetupOptions,
                                                  StandardOptions, WorkerOptions)

from contract import layout, metadata
from pipelines import console, progress
from pipelines.options import UsageError, check_input, check_output, check_temp_locations, parse_args
from transforms import gcs, storage
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

# Dataflow workers install the project from this file (with requirements/worker.txt only: no TensorFlow).
SETUP_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'setup.py')


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


def _is_dataflow(runner):
    return str(runner).lower() in ('dataflowrunner', 'dataflow')


def _dataflow_defaults(options):
    """Checks what Dataflow needs before anything is staged, and ships the project's code to the workers.

    Workers get the code through ``--setup_file`` (this project's setup.py unless the user gave one, or a
    custom worker image with ``--sdk_container_image``), with only the worker requirements.
    """
    cloud = options.view_as(GoogleCloudOptions)
    for name in ('project', 'region'):
        if not getattr(cloud, name):
            raise UsageError(f'--{name} is required with --runner DataflowRunner')
    if not cloud.temp_location:
        raise UsageError('--temp_location gs://BUCKET/PATH is required with --runner DataflowRunner '
                         '(Dataflow stages the code and temporary files there)')
    for name in ('temp_location', 'staging_location'):
        value = getattr(cloud, name)
        if value and not gcs.is_gcs(value):
            raise UsageError(f'--{name} must be a gs:// path with --runner DataflowRunner, got {value!r}')
    setup = options.view_as(SetupOptions)
    # A custom worker image (--sdk_container_image, e.g. the Dockerfile's) already holds the project.
    if setup.setup_file is None and not options.view_as(WorkerOptions).sdk_container_image:
        if not os.path.isfile(SETUP_FILE):
            raise UsageError('--setup_file PATH/TO/setup.py is required with --runner DataflowRunner '
                             '(no setup.py next to the installed package)')
        setup.setup_file = SETUP_FILE


_DIRECT_RUNNER_NAMES = ('DirectRunner', 'direct')


def _given(args, flag):
    """Whether the user passed ``flag`` (as ``--flag value`` or ``--flag=value``)."""
    return any(arg == flag or arg.startswith(flag + '=') for arg in args)


def pipeline_options(beam_args):
    """Beam options from the leftover arguments, defaulting to a multi-process DirectRunner.

    With DataflowRunner, checks the options Dataflow needs and sets ``--setup_file``. Against a GCS
    emulator (STORAGE_EMULATOR_HOST), makes this process and every worker connect anonymously at once.
    """
    options = PipelineOptions(beam_args)
    standard = options.view_as(StandardOptions)
    if standard.runner is None:
        standard.runner = 'DirectRunner'
    direct = options.view_as(DirectOptions)
    if standard.runner in _DIRECT_RUNNER_NAMES:
        if not _given(beam_args, '--direct_running_mode'):
            direct.direct_running_mode = 'multi_processing'
        if direct.direct_running_mode == 'multi_processing' and not _given(beam_args, '--direct_num_workers'):
            direct.direct_num_workers = os.cpu_count() or 1
        worker = options.view_as(WorkerOptions)
        if worker.default_sdk_harness_log_level is None:
            # Local workers print to the user's terminal: only what main() would not report itself.
            worker.default_sdk_harness_log_level = 'CRITICAL'
    if _is_dataflow(standard.runner):
        _dataflow_defaults(options)
    if os.environ.get(gcs.EMULATOR_HOST):
        gcs.connect_anonymously_to_emulator()
        setup = options.view_as(SetupOptions)
        setup.beam_plugins = sorted(set(setup.beam_plugins or ()) | {gcs.__name__})
    return options


def local_runner(options):
    """Beam's Python FnApiRunner when the DirectRunner is asked for, else None (Beam resolves the name).

    Beam's DirectRunner now first tries Prism, a binary it downloads at run time; our local runs must
    work offline and honour ``--direct_running_mode`` and ``--direct_num_workers``, which Prism ignores.
    """
    if options.view_as(StandardOptions).runner in _DIRECT_RUNNER_NAMES:
        return progress.CountingRunner()  # progress (issue 11): an FnApiRunner that keeps live counters
    return None


def run(argv=None):
    """Builds a dataset; returns (BuildConfig, PipelineResult). Raises UsageError, or the runner's error.

    Waits for the job to finish unless ``--no_wait_until_finish`` (Beam's option) is given.
    """
    try:  # progress (issue 11)
        show_progress, progress_interval, argv = progress.split_flags(sys.argv[1:] if argv is None else argv)
    except ValueError as error:
        raise UsageError(str(error)) from None
    config, beam_args = parse_args(argv)
    options = pipeline_options(beam_args)
    check_input(config, options)
    check_output(config, options)
    check_temp_locations(options)
    try:
        pipeline = beam.Pipeline(runner=local_runner(options), options=options)
    except ValueError as error:  # Beam's own checks of the options (runner name, project id...)
        raise UsageError(' '.join(str(error).split())) from None
    build_pipeline(pipeline, config)
    with progress.Progress(pipeline, options, show_progress, progress_interval) as watch:  # progress (issue 11)
        result = pipeline.run()
        if not options.view_as(StandardOptions).no_wait_until_finish:
            watch.wait(result)
    return config, result


def _report(config, result, argv):
    """The summary of a finished build, or one line about a Dataflow job or template that was not waited for."""
    options = PipelineOptions(argv)
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.template_location:
        return f'build-dataset: wrote the Dataflow job as a template to {cloud.template_location}'
    if getattr(result, 'has_job', False) and options.view_as(StandardOptions).no_wait_until_finish:
        return (f'build-dataset: submitted Dataflow job {result.job_id()}: https://console.cloud.google.com/'
                f'dataflow/jobs/{cloud.region}/{result.job_id()}?project={cloud.project}')
    return summary(config)


def summary(config):
    """One line a split, read back from the published dataset.json."""
    document = metadata.loads(storage.read_bytes(layout.join(config.version_dir, layout.DATASET_JSON)))
    counts = document['counts']
    lines = [f"build-dataset: wrote {counts['written']} of {counts['inputs']} images to {config.version_dir} "
             f"({counts['quarantined']} quarantined, {counts['duplicates']} duplicates, "
             f"{counts['ignored']} non-image files ignored)"]
    for name, split in document['splits'].items():
        lines.append(f"  {name}: {split['num_examples']} examples in {split['num_shards']} shard(s)")
    return '\n'.join(lines)


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')
    # Runners log a failing step's traceback before raising; main() reports a BuildFailed in one line
    # and lets any other error raise with its traceback.
    logging.getLogger('apache_beam.runners').setLevel(logging.CRITICAL)
    # On Dataflow the runner's own log is the progress report: the job's id, states and messages.
    logging.getLogger('apache_beam.runners.dataflow.dataflow_runner').setLevel(logging.INFO)
    progress.keep_stderr()  # progress (issue 11): its lines reach the user while a local run holds stderr
    with console.held_stderr() if console.is_local_run(argv) else contextlib.nullcontext(lambda: None) as replay:
        try:
            config, result = run(argv)
        except UsageError as error:
            failure = f'build-dataset: error: {error}', 2
        except Exception as error:  # a runner wraps our BuildFailed in its own exception types
            message = build_failure_message(error)
            if message is None:
                replay()
                raise
            failure = f'build-dataset: failed: {message}', 1
        else:
            failure = None
            replay()  # warnings of a run that went well (retried reads, say) are the user's to see
    if failure:
        print(failure[0], file=sys.stderr)
        return failure[1]
    print(_report(config, result, argv))
    return 0


if __name__ == '__main__':
    sys.exit(main())
