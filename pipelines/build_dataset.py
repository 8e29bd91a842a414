"""Launches the build job: options, runner, pre-flight checks, the run, and the report.

    python -m pipelines.build_dataset --input DIR_OR_GS_PREFIX --output DIR_OR_GS_PREFIX [options]

Runs on the DirectRunner (multi-processing, one worker per core) unless ``--runner`` says otherwise.
The graph itself is ``pipelines.graph``.
"""
import contextlib
import dataclasses
import logging
import os
import sys

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import (
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    WorkerOptions,
)
from apache_beam.runners.portability.fn_api_runner import fn_runner

from contract import layout, metadata
from imgrec_console.errors import build_failure_message
from imgrec_storage import fileio, gcs, retries
from pipelines import console, local_workers, preflight, progress, refresh
from pipelines.graph import build_pipeline
from pipelines.options import DATAFLOW_RUNNER, DIRECT_RUNNER, UsageError, parse_args, runner_name

# Dataflow workers install the project from this file (with requirements/worker.txt only: no TensorFlow).
SETUP_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'setup.py')


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
    standard.runner = runner_name(beam_args)
    direct = options.view_as(DirectOptions)
    if is_local(options):
        if not _given(beam_args, '--direct_running_mode'):
            direct.direct_running_mode = 'multi_processing'
        if direct.direct_running_mode == 'multi_processing' and not _given(beam_args, '--direct_num_workers'):
            direct.direct_num_workers = os.cpu_count() or 1
        worker = options.view_as(WorkerOptions)
        if worker.default_sdk_harness_log_level is None:
            # Local workers print to the user's terminal: only what main() would not report itself.
            worker.default_sdk_harness_log_level = 'CRITICAL'
    if standard.runner == DATAFLOW_RUNNER:
        _dataflow_defaults(options)
    if os.environ.get(gcs.EMULATOR_HOST):
        gcs.connect_anonymously_to_emulator()
        setup = options.view_as(SetupOptions)
        setup.beam_plugins = sorted(set(setup.beam_plugins or ()) | {gcs.__name__})
    return options


def is_local(options):
    return options.view_as(StandardOptions).runner == DIRECT_RUNNER


def local_runner(options, live_counters=True):
    """Beam's Python FnApiRunner when the DirectRunner is asked for, else None (Beam resolves the name).

    Beam's DirectRunner now first tries Prism, a binary it downloads at run time; our local runs must
    work offline and honour ``--direct_running_mode`` and ``--direct_num_workers``, which Prism ignores.
    With ``live_counters`` (progress lines), the FnApiRunner polls running bundles for their counters.
    """
    if not is_local(options):
        return None
    return progress.CountingRunner() if live_counters else fn_runner.FnApiRunner()


def parse(argv):
    """(BuildConfig, PipelineOptions) of a command line; raises UsageError."""
    config, beam_args = parse_args(argv)
    return config, pipeline_options(beam_args)


def run(argv=None):
    """Builds a dataset; returns (BuildConfig, PipelineResult). Raises UsageError, or the runner's error."""
    config, options = parse(argv)
    return launch(config, options)


def launch(config, options):
    """Checks the destinations, then runs the job; returns (BuildConfig as run, PipelineResult).

    Waits for the job to finish unless ``--no_wait_until_finish`` (Beam's option) is given.
    """
    config = preflight.check(config, options)
    config = dataclasses.replace(config, refresh=refresh.plan(config))
    if config.refresh.full_reason:
        print(f'build-dataset: full build: {config.refresh.full_reason}', flush=True)
    with local_workers.local_run(local_worker_count(options)) if is_local(options) else contextlib.nullcontext():
        try:
            pipeline = beam.Pipeline(runner=local_runner(options, config.progress), options=options)
        except ValueError as error:  # Beam's own checks of the options (runner name, project id...)
            raise UsageError(' '.join(str(error).split())) from None
        build_pipeline(pipeline, config)
        with progress.Progress(pipeline, options, config.progress, config.progress_interval) as watch:
            result = pipeline.run()
            if not options.view_as(StandardOptions).no_wait_until_finish:
                watch.wait(result)
    return config, result


def local_worker_count(options):
    """How many worker processes a local run starts: one a core unless told, none but in multi-processing."""
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != 'multi_processing':
        return 0
    return direct.direct_num_workers or os.cpu_count() or 1  # Beam reads 0 as one a core


def report(config, result, options):
    """The summary of a finished build, or one line about a Dataflow job or template that was not waited for."""
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.template_location:
        return f'build-dataset: wrote the Dataflow job as a template to {cloud.template_location}'
    if getattr(result, 'has_job', False) and options.view_as(StandardOptions).no_wait_until_finish:
        return (f'build-dataset: submitted Dataflow job {result.job_id()}: https://console.cloud.google.com/'
                f'dataflow/jobs/{cloud.region}/{result.job_id()}?project={cloud.project}')
    if counter(result, 'unchanged'):
        lines = [f'build-dataset: nothing changed since version {config.refresh.previous}: no new version '
                 f'published, LATEST stays (--force publishes anyway)']
    else:
        lines = [summary(config)]
    retried = retries.summary_line(result)
    if retried:
        lines.append(f'  {retried}')
    return '\n'.join(lines)


def counter(result, name):
    """The committed value of the job's counter ``name``, summed over steps."""
    counters = result.metrics().query(MetricsFilter().with_name(name))['counters']
    return sum(c.committed for c in counters)


def summary(config):
    """One line a split, read back from the published dataset.json."""
    document = metadata.loads(fileio.read_bytes(layout.join(config.version_dir, layout.DATASET_JSON)))
    counts, refreshed = document['counts'], document['refresh']
    lines = [f"build-dataset: wrote {counts['written']} of {counts['inputs']} images to {config.version_dir} "
             f"({counts['quarantined']} quarantined, {counts['duplicates']} duplicates, "
             f"{counts['ignored']} non-image files ignored)"]
    if refreshed['mode'] == 'incremental':
        lines.append(f"  refresh of {refreshed['previous']}: {refreshed['reused']} reused, {refreshed['decoded']} "
                     f"decoded ({refreshed['new']} new, {refreshed['changed']} changed), "
                     f"{refreshed['removed']} removed")
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
    try:
        config, options = parse(argv)
    except UsageError as error:
        print(f'build-dataset: error: {error}', file=sys.stderr)
        return 2
    progress.keep_stderr()  # progress lines reach the user while a local run holds stderr
    hold = is_local(options) and not config.verbose
    with console.held_stderr() if hold else contextlib.nullcontext(console.NotHeld()) as held:
        try:
            config, result = launch(config, options)
        except UsageError as error:
            failure = f'build-dataset: error: {error}', 2
        except Exception as error:  # a runner wraps our BuildFailed in its own exception types
            message = build_failure_message(error)
            if message is None and config.verbose:
                raise
            if message is None:  # disk full, permission revoked, a bug: the details go to a log file
                log = console.write_log(error, held.read())
                message = f'{console.failure_line(error)} (details in {log}; --verbose shows them)'
            failure = f'build-dataset: failed: {message}', 1
        else:
            failure = None
            held.replay()  # warnings of a run that went well (retried reads, say) are the user's to see
    if failure:
        print(failure[0], file=sys.stderr)
        return failure[1]
    print(report(config, result, options))
    return 0


def cli():
    """The ``build-dataset`` command: main(), then an exit that skips tearing the interpreter down.

    Beam, gRPC and the runner's threads take a third of a second to unload, after everything is written.
    """
    local_workers.tune_malloc()
    status = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # pylint: disable=protected-access


if __name__ == '__main__':
    cli()
