"""Launches the build job: options, runner, pre-flight checks, the run, and the report.

    python -m imgrec.pipelines.build_dataset --input DIR_OR_GS_PREFIX --output DIR_OR_GS_PREFIX [options]

From Python (a notebook), ``build(input=..., output=..., **options)`` runs the same build (docs/python-api.md).
Runs on the DirectRunner unless ``--runner`` says otherwise: a worker process per core, or with
``--direct_running_mode in_memory`` in this process, decoding on a thread per core. The graph itself is
``imgrec.pipelines.graph``.
"""
if __name__ == '__main__':  # ``python -m``: the command answers --help and option mistakes before Beam loads
    from imgrec.pipelines.command_line import cli as _cli  # pylint: disable=import-outside-toplevel
    _cli()  # never returns: it runs this module, imported by its name, and exits

import contextlib
import dataclasses
import difflib
import logging
import os
import sys
import typing

import apache_beam as beam
from apache_beam.runners.runner import PipelineResult
from apache_beam.options.pipeline_options import (
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    TypeOptions,
    WorkerOptions,
)

import imgrec
from imgrec.contract import counters, layout, metadata, version_ref
from imgrec.console.command import Command, was_interrupted
from imgrec.console.errors import BuildFailed, CommandError, Interrupted, UserError, build_failure_message
from imgrec.console.held_stderr import held_stderr
from imgrec.storage import publication, retries, storage
from imgrec.versions import failed_build
from imgrec.pipelines import beam_names, job_endpoint, preflight, progress, refresh
from imgrec.pipelines.build_result import BuildResult
from imgrec.pipelines.graph import build_pipeline
from imgrec.pipelines.command_line import cli  # noqa: F401  # the command (and an older install's entry point)
from imgrec.pipelines.local import internals
from imgrec.pipelines.options import (
    DATAFLOW_RUNNER,
    DIRECT_RUNNER,
    BuildConfig,
    RunFacts,
    own_options,
    parse_args,
    runner_name,
    utc_now,
)
from imgrec.transforms.labels import listed_names
from imgrec.transforms.listing import is_image_name
from imgrec.transforms.publish import earlier_run, ranked_reasons, retention

# Dataflow workers install the project from this file (with requirements/worker.txt only: no TensorFlow).
TOP_REASONS = 3  # quarantine reasons the summary names
SETUP_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(imgrec.__file__))), 'setup.py')


class BeamOptions(PipelineOptions):
    """Beam's options, each view (``view_as``) made once.

    Beam asks the options for a view on every transform it applies, about a thousand times a build, and
    each new view parses the command line again: a third of building the graph. Views of one options
    object share their values (``PipelineOptions.view_as``: a change made through one is seen by all),
    so one view of each class serves every ask. Adds no option.
    """

    def view_as(self, cls):
        views = self.__dict__.get('_views')
        if views is None:
            views = {}
            object.__setattr__(self, '_views', views)  # PipelineOptions.__setattr__ takes options only
        if cls not in views:
            views[cls] = super().view_as(cls)
        return views[cls]


def check_beam_values(beam_args):
    """Beam's own parser over the arguments left for Beam: a value it refuses is a one-line UserError.

    Their names were checked before Beam was loaded (``imgrec.pipelines.options``); this also catches one that
    Beam no longer takes, should the names kept there be of another Beam release.
    """
    _, unknown = beam_names.parser().parse_known_args(beam_args)
    for arg in unknown:
        raise UserError(f"unknown option {arg.split('=', 1)[0]}" if arg.startswith('-')
                        else f'unexpected argument {arg!r}')


def _dataflow_defaults(options):
    """Checks what Dataflow needs before anything is staged, and ships the project's code to the workers.

    Workers get the code through ``--setup_file`` (this project's setup.py unless the user gave one, or a
    custom worker image with ``--sdk_container_image``), with only the worker requirements.
    """
    cloud = options.view_as(GoogleCloudOptions)
    for name in ('project', 'region'):
        if not getattr(cloud, name):
            raise UserError(f'--{name} is required with --runner DataflowRunner')
    if not cloud.temp_location:
        raise UserError('--temp_location gs://BUCKET/PATH is required with --runner DataflowRunner '
                         '(Dataflow stages the code and temporary files there)')
    for name in ('temp_location', 'staging_location'):
        value = getattr(cloud, name)
        if value and not storage.storage_for(value).reachable_by_cloud_workers:
            raise UserError(f'--{name} must be a gs:// path with --runner DataflowRunner, got {value!r}')
    setup = options.view_as(SetupOptions)
    # A custom worker image (--sdk_container_image, e.g. the Dockerfile's) already holds the project.
    if setup.setup_file is None and not options.view_as(WorkerOptions).sdk_container_image:
        if not os.path.isfile(SETUP_FILE):
            raise UserError('--setup_file PATH/TO/setup.py is required with --runner DataflowRunner '
                             '(no setup.py next to the installed package)')
        setup.setup_file = SETUP_FILE


def _given(args, flag):
    """Whether the user passed ``flag`` (as ``--flag value`` or ``--flag=value``)."""
    return any(arg == flag or arg.startswith(flag + '=') for arg in args)


# A local build's running mode unless --direct_running_mode names one: a worker process per core. in_memory
# (one process, decoding on a thread per core) used less CPU and memory, but its progress lines move only
# when a step ends; multi_threading lost or garbled elements at 20,000 images (docs/benchmarks.md).
LOCAL_RUNNING_MODE = 'multi_processing'
# A local build of fewer images than this runs in_memory instead, unless --direct_running_mode names a mode:
# below it, starting worker processes costs more than the second core gains, and the bytes are the same.
# Measured with benchmarks/startup.py --threshold (docs/benchmarks.md, 2026-12-03), photos at 224x224 on 2
# shared cores, in_memory against multi_processing, whole processes: 40 images 22.9 against 46.9 s, 400 39.8
# against 63.0 s, 1,000 63.4 against 69.6 s, 2,400 112.3 against 103.0 s; the two cross near 1,560.
SMALL_BUILD_IMAGES = 1500
# Beam's multi_threading mode, refused: in 3 of 3 builds of 20,000 photos (with and without our patches, with
# and without decode threads) it lost or garbled elements, which the accounting caught only at the end.
REFUSED_MODE = 'multi_threading'


def pipeline_options(beam_args: list[str], config: BuildConfig | None = None) -> PipelineOptions:
    """Beam options from the leftover arguments, defaulting to the DirectRunner in ``LOCAL_RUNNING_MODE``
    with a worker per core (in_memory for a ``config`` of fewer than ``SMALL_BUILD_IMAGES`` images);
    refuses ``REFUSED_MODE`` in one line.

    With DataflowRunner, checks the options Dataflow needs and sets ``--setup_file``. (Against a GCS
    emulator, local worker processes get their plugin from the runner: ``internals.local_run``.)
    """
    check_beam_values(beam_args)
    options = BeamOptions(beam_args)
    standard = options.view_as(StandardOptions)
    standard.runner = runner_name(beam_args)
    direct = options.view_as(DirectOptions)
    if is_local(options):
        if not _given(beam_args, '--direct_running_mode'):
            small = config is not None and counted_images(config, SMALL_BUILD_IMAGES) < SMALL_BUILD_IMAGES
            direct.direct_running_mode = 'in_memory' if small else LOCAL_RUNNING_MODE
        if direct.direct_running_mode == REFUSED_MODE:
            raise UserError(f'--direct_running_mode {REFUSED_MODE} is refused: in Beam {beam.__version__} it lost or '
                            'garbled elements of large builds; use multi_processing (the default) or in_memory')
        if direct.direct_running_mode == 'multi_processing' and not _given(beam_args, '--direct_num_workers'):
            direct.direct_num_workers = os.cpu_count() or 1
        worker = options.view_as(WorkerOptions)
        if worker.default_sdk_harness_log_level is None:
            # Local workers print to the user's terminal: only what main() would not report itself.
            worker.default_sdk_harness_log_level = 'CRITICAL'
        # The graph's type hints are checked as Beam builds it for Dataflow (tests/test_dataflow_submission.py);
        # the graph is the same every run, and checking it again costs a local build ~0.4 s of its start-up.
        options.view_as(TypeOptions).pipeline_type_check = False
    if standard.runner == DATAFLOW_RUNNER:
        _dataflow_defaults(options)
    return options


def counted_images(config: BuildConfig, limit: int) -> int:
    """The images a local --input (or local manifest) lists, counted up to ``limit`` by name only; ``limit``
    for a gs:// one or one that cannot be read (its listing costs requests; the pre-flight checks say why)."""
    source = config.input or config.manifest or ''
    if (source and storage.storage_for(source).remote) or (config.input and not os.path.isdir(config.input)):
        return limit
    count = 0
    try:
        if config.manifest:
            with open(config.manifest, 'rb') as stream:
                count = sum(1 for line, _ in zip(stream, range(limit + 1)) if line.strip())  # a header line too
        else:
            for folder, _, names in os.walk(str(config.input)):
                count += sum(1 for name in names if is_image_name(name)) if folder != config.input else 0
                if count >= limit:
                    break
    except OSError:
        return limit
    return min(count, limit)


def is_local(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner == DIRECT_RUNNER


def local_runner(options, live_counters=True):
    """Beam's Python FnApiRunner when the DirectRunner is asked for, else None (Beam resolves the name).

    Beam's DirectRunner now first tries Prism, a binary it downloads at run time; our local runs must
    work offline and honour ``--direct_running_mode`` and ``--direct_num_workers``, which Prism ignores.
    With ``live_counters`` (progress lines), the FnApiRunner polls running bundles for their counters
    (feature live-counters, ``imgrec.pipelines.local``). ``launch`` takes its runner from ``internals.local_run``.
    """
    if not is_local(options):
        return None
    return internals.runner(live_counters)


def parse(argv: typing.Sequence[str] | None) -> tuple[BuildConfig, RunFacts, PipelineOptions]:
    """(BuildConfig, RunFacts, PipelineOptions) of a command line; raises UserError."""
    now = utc_now()  # names the version (unless --version does) and is the run's 'created'
    config, beam_args = parse_args(argv, now)
    try:
        internals.selected()  # IMGREC_BEAM_PATCHES
    except ValueError as error:
        raise UserError(str(error)) from None
    options = pipeline_options(beam_args, config)
    facts = dataclasses.replace(RunFacts.start(now), decoders=decoders(options, beam_args))
    return config, facts, options


def run(argv: typing.Sequence[str] | None = None) -> tuple[BuildConfig, 'PipelineResult | NothingChanged']:
    """Builds a dataset; returns (BuildConfig, PipelineResult). Raises UserError, or the runner's error."""
    config, facts, options = parse(argv)
    config, _, result = launch(config, facts, options)
    return config, result


def launch(config: BuildConfig, facts: RunFacts,
           options: PipelineOptions) -> tuple[BuildConfig, RunFacts, 'PipelineResult | NothingChanged']:
    """Checks the destinations, then runs the job; returns (BuildConfig as run, RunFacts, PipelineResult).

    Waits for the job to finish unless ``--no_wait_until_finish`` (Beam's option) is given. A local run
    applies the Beam internals it uses for as long as it runs (``imgrec.pipelines.local``); a Dataflow
    submission applies none.
    """
    local = is_local(options)
    job_endpoint.check(options)
    with internals.gcs_emulator() if local else contextlib.nullcontext():
        config, latest = preflight.check(config, options)
        plan = refresh.plan(config, latest, options)
        facts = dataclasses.replace(facts, previous=latest, refresh=plan)
        if plan.full_reason:
            print(f'build-dataset: full build: {plan.full_reason}', flush=True)
        # Known from a listing, before any pipeline starts; a template runs nothing now, so it is always written.
        if not options.view_as(GoogleCloudOptions).template_location and \
                refresh.nothing_changed(config, plan, options):
            return config, facts, NothingChanged(prune(config, preflight.job_storage(config.output, config, options)))
        with (internals.local_run(local_worker_count(options), config.progress) if local
              else contextlib.nullcontext()) as run:
            try:
                pipeline = beam.Pipeline(runner=run.runner if run else None, options=options)
            except ValueError as error:  # Beam's own checks of the options (runner name, project id...)
                raise UserError(' '.join(str(error).split())) from None
            build_pipeline(pipeline, config, facts)
            with build_lease(config, facts, options), failure_report(config, facts, options), \
                    progress.Progress(pipeline, options, config.progress, config.progress_interval) as watch:
                result = pipeline.run()
                if not options.view_as(StandardOptions).no_wait_until_finish:
                    watch.wait(result)
    return config, facts, result


@dataclasses.dataclass(frozen=True)
class NothingChanged:
    """The result of a refresh found to change nothing before any pipeline started: what pruning did."""
    retention: publication.Retention | None


def prune(config, files):
    """--keep_versions after a build that published nothing (the prune step's rule), through ``files`` (the
    output's storage); None without it."""
    if not config.keep_versions:
        return None
    return publication.keep_newest(config.output, config.keep_versions, files)


def build_lease(config, facts, options):
    """The build's lease on its staging folder (docs/publication.md), held while the job runs: renewed by
    this process while it waits, else written once to last (a Dataflow job nobody waits for). A
    template runs nothing now: no lease."""
    if options.view_as(GoogleCloudOptions).template_location:
        return contextlib.nullcontext()
    return publication.build_lease(config.output, facts.staging_dir(config),
                                   detached=options.view_as(StandardOptions).no_wait_until_finish,
                                   files=preflight.job_storage(config.output, config, options))


def failure_report(config, facts, options):
    """A failed build's report, written into its staging folder while the build still holds its lease and
    named in the failure line (``imgrec.versions.failed_build``)."""
    return failed_build.reporting(facts.staging_dir(config), {
        'name': config.name, 'version': config.version, 'created': facts.created, 'options': config.describe(),
        'previous': facts.previous.version if facts.previous else None},
        preflight.job_storage(facts.staging_dir(config), config, options))


def decoders(options, beam_args):
    """Decoders each decoding DoFn hands the pixel work to (``imgrec.transforms.decode``): in a local in_memory
    run, whose runner runs every stage on one thread, one a core (or ``--direct_num_workers``); else none."""
    direct = options.view_as(DirectOptions)
    if not is_local(options) or direct.direct_running_mode != 'in_memory':
        return 0
    if _given(beam_args, '--direct_num_workers'):
        return max(1, direct.direct_num_workers or os.cpu_count() or 1)  # Beam reads 0 as one a core
    return os.cpu_count() or 1


def local_worker_count(options):
    """How many worker processes a local run starts: one a core unless told, none but in multi-processing."""
    direct = options.view_as(DirectOptions)
    if direct.direct_running_mode != 'multi_processing':
        return 0
    return direct.direct_num_workers or os.cpu_count() or 1  # Beam reads 0 as one a core


def report(config, facts, result, options):
    """The summary of a finished build, or one line about a Dataflow job or template that was not waited for."""
    cloud = options.view_as(GoogleCloudOptions)
    if cloud.template_location:
        return f'build-dataset: wrote the Dataflow job as a template to {cloud.template_location}'
    if getattr(result, 'has_job', False) and options.view_as(StandardOptions).no_wait_until_finish:
        return (f'build-dataset: submitted Dataflow job {result.job_id()}: https://console.cloud.google.com/'
                f'dataflow/jobs/{cloud.region}/{result.job_id()}?project={cloud.project}')
    if unchanged(result):
        lines = [f'build-dataset: nothing changed since version {facts.refresh.previous}: no new version '
                 f'published, LATEST stays (--force publishes anyway)']
    else:
        lines = [summary(config, options)]
    built = not isinstance(result, NothingChanged)
    if built and earlier_run(result):
        lines.append(f'  version {config.version} stands as an earlier run of this build published it: this run '
                     f'published nothing new')
    kept = retention(result) if built else result.retention
    if kept:
        lines.append(f'  pruned to {kept.describe()}')
    retried = retries.summary_line(result) if built else None
    if retried:
        lines.append(f'  {retried}')
    return '\n'.join(lines)


def unchanged(result):
    """Whether the build found nothing changed and published nothing: before the job ran, or in it."""
    return isinstance(result, NothingChanged) or bool(counter(result, counters.UNCHANGED))


def counter(result, name):
    """The value of the job's counter ``name`` (``imgrec.contract.counters``' rule), summed over steps.

    ``name`` is a ``imgrec.contract.counters.Counter``, or a bare name, summed over the namespaces that use it.
    """
    values = counters.read(result)
    return values[name] if isinstance(name, counters.Counter) else counters.by_name(values, name)


def _count(n, noun):
    return f'{n} {noun}' if n == 1 else f'{n} {noun}s'


def _split_line(name, split):
    """'train: 1986 examples (89.9%, asked 90.0%) in 16 shard(s)': the share got next to the share asked."""
    shares = (f" ({split['share']:.1%}, asked {split['requested_share']:.1%})"
              if split.get('share') is not None and split.get('requested_share') is not None else '')
    return f"  {name}: {split['num_examples']} examples{shares} in {split['num_shards']} shard(s)"


def _near_duplicates_line(near):
    """What the near-duplicate step found and did, from dataset.json's ``near_duplicates``."""
    return '\n'.join(_near_duplicates_lines(near))


def _near_duplicates_lines(near):
    if not near or near.get('mode') in (None, 'off'):
        yield '  near-duplicates: not looked for (--near_duplicates off)'
        return
    head, groups = f"  near-duplicates ({near['mode']})", near.get('groups') or 0
    if not groups:
        yield f'{head}: none found'
    else:
        found = f"{head}: {_count(groups, 'group')} (largest {_count(near.get('largest_group') or 0, 'image')})"
        across = f"{_count(near.get('pairs_across_labels') or 0, 'pair')} across classes"
        cut = near.get('links_cut') or 0
        cut = f", {_count(cut, 'link')} cut to bound group size" if cut else ''
        if near['mode'] == 'group':
            quarantined = (f", {_count(near.get('label_conflicts') or 0, 'image')} quarantined as label conflicts"
                           if near.get('conflicts') == 'quarantine' else f', {across} (kept)')
            yield (f"{found}, {_count(near.get('images_moved') or 0, 'image')} moved to keep groups together, "
                   f"{_count(near.get('pairs_across_splits') or 0, 'pair')} in two splits{cut}{quarantined}")
        else:
            yield f"{found}, {_count(near.get('pairs_across_splits') or 0, 'pair')} in two splits, {across}{cut}"
        pairs = near.get('label_conflict_pairs') or []
        if pairs and near.get('conflicts') != 'quarantine':
            shown = '; '.join(f"{p['source']} ({p['label']}) ~ {p['other']} ({p['other_label']})" for p in pairs[:3])
            more = (near.get('pairs_across_labels') or len(pairs)) - min(3, len(pairs))
            yield (f"  near-duplicates under two labels, both written: {shown}"
                   + (f" and {more} more" if more > 0 else '')
                   + ' (all in near_duplicates.jsonl and the report; --near_duplicate_conflicts quarantine removes them)')
    again = near.get('conflicts_written_again') or 0
    if again:
        yield (f"  {_count(again, 'image')} the previous version quarantined as near-duplicate label conflicts "
               f"{'was' if again == 1 else 'were'} decided again and written (--near_duplicate_conflicts keep)")


def _class_lines(document):
    """The empty classes and those with fewer images than splits (dataset.json's ``classes``), if any."""
    classes, lines = document.get('classes') or {}, []
    if classes.get('empty'):
        lines.append(f"  empty classes (no image written): {listed_names(classes['empty'])}")
    if classes.get('fewer_than_splits'):
        written = {label: sum(split['class_counts'].get(label, 0) for split in document['splits'].values())
                   for label in classes['fewer_than_splits']}
        splits = metadata.num_splits(document)
        lines.append(f'  classes with fewer images than the {splits} splits: '
                     + listed_names(classes['fewer_than_splits'], lambda label: f'{label!r} ({written[label]})'))
    return lines


def summary(config, options):
    """The build's outcome, read back from the published dataset.json (through the job's storage: ``options``,
    the job's): the counts, each split's share next to the share asked, the near-duplicates, the top
    quarantine reasons, the class problems, and where the quarantine list and the report are."""
    path = layout.join(config.version_dir, layout.DATASET_JSON)
    document = version_ref.parse_document(preflight.job_storage(path, config, options).read(path), path)
    counts, refreshed = document['counts'], document['refresh']
    lines = [f"build-dataset: wrote {counts['written']} of {counts['inputs']} images to {config.version_dir} "
             f"({counts['quarantined']} quarantined, {counts['duplicates']} duplicates, "
             f"{counts['ignored']} non-image files ignored)"]
    if refreshed['mode'] == 'incremental':
        damaged = refreshed.get('reuse_damaged')
        lines.append(f"  refresh of {refreshed['previous']}: {refreshed['reused']} reused, {refreshed['decoded']} "
                     f"decoded ({refreshed['new']} new, {refreshed['changed']} changed"
                     + (f", {damaged} damaged in {refreshed['previous']}" if damaged else '') +
                     f"), {refreshed['removed']} removed")
    lines += [_split_line(name, split) for name, split in document['splits'].items()]
    lines.append(_near_duplicates_line(document.get('near_duplicates')))
    quarantine = document.get('quarantine') or {}
    if quarantine.get('by_reason'):
        more = len(quarantine['by_reason']) - TOP_REASONS
        lines.append(f"  quarantined: {ranked_reasons(quarantine['by_reason'], TOP_REASONS)}"
                     + (f" and {_count(more, 'more reason')}" if more > 0 else '')
                     + f"; every input and why: {layout.join(config.version_dir, quarantine['file'])}")
    lines += _class_lines(document)
    lines.append(f'  report: {layout.join(config.version_dir, layout.REPORT_HTML)}')
    return '\n'.join(lines)


def main(argv: typing.Sequence[str] | None = None) -> int:
    """Returns the exit status: 0 built, 2 a usage mistake, 1 a failed build."""
    argv = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')
    # Runners log a failing step's traceback before raising; main() reports a BuildFailed in one line,
    # and any other error's traceback goes to a log file (or to the terminal with --verbose).
    logging.getLogger('apache_beam.runners').setLevel(logging.CRITICAL)
    # On Dataflow the runner's own log is the progress report: the job's id, states and messages.
    logging.getLogger('apache_beam.runners.dataflow.dataflow_runner').setLevel(logging.INFO)
    with Command('build-dataset') as command:
        config, facts, options = parse(argv)
        progress.keep_stderr()  # progress lines reach the user while a local run holds stderr
        if is_local(options):  # a Beam internal this Beam no longer allows is named now, before stderr is held
            internals.check(internals.needed(local_worker_count(options), config.progress))
        command.begin(verbose=config.verbose, hold=is_local(options))
        try:
            config, facts, result = launch(config, facts, options)
        except KeyboardInterrupt:
            raise Interrupted(left_behind(config, facts, options)) from None
        except Exception as error:  # a runner wraps our BuildFailed, and a Ctrl-C, in its own exception types
            if was_interrupted(error):
                raise Interrupted(left_behind(config, facts, options)) from None
            message = build_failure_message(error)
            if message is None:
                raise
            raise BuildFailed(message) from error
        command.release(replay=True)  # warnings of a run that went well (retried reads, say) are the user's to see
        print(report(config, facts, result, options))
        return 0
    return command.status


def left_behind(config, facts, options):
    """What an interrupted build leaves: whether it published, and its staging folder if it made one (read
    through the job's storage: ``options``, the job's)."""
    try:
        files = preflight.job_storage(config.output, config, options)
        published = publication.read_latest(config.output, files).version == config.version
        staging = facts.staging_dir(config)
        kept = any(files.for_path(staging).list_level(staging))
    except Exception:  # pylint: disable=broad-except  # storage gone too: say what is certain
        return f'LATEST and the staging folder of this build in {config.output} could not be checked'
    line = f'published version {config.version} before it stopped' if published else \
        'nothing was published (LATEST is as it was)'
    if kept:
        return f'{line}; left the staging folder {staging} (a build with --clean removes it)'
    return f'{line}; no staging folder was left'


def _argument(name, value):
    """The command-line text of one keyword argument of ``build``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):  # splits={'train': 80, 'validation': 20}
        return ','.join(f'{key}={count}' for key, count in value.items())
    if isinstance(value, (list, tuple)):  # image_size=(224, 160), formats=['tfrecord', 'array_record']
        return ('x' if name == 'image_size' else ',').join(map(str, value))
    return str(value)


def build_argv(options):
    """The command line of ``build``'s keyword arguments (None: the option's default); unknown names are a
    one-line UserError."""
    known, argv = own_options(), []
    for name, value in options.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f' (did you mean {close[0]!r}?)' if close else ''
            raise UserError(f'build() got an unknown option {name!r}{hint}; Beam\'s own options go in '
                            f"beam_options=['--name=value', ...]")
        if value is not None:
            argv.append(f'--{name}={_argument(name, value)}')
    return argv


@contextlib.contextmanager
def _quiet_beam_logs(verbose):
    """Beam's loggers at the levels ``main`` gives them, for the block: no warnings of Beam's own."""
    if verbose:
        yield
        return
    levels = {'apache_beam': logging.ERROR, 'apache_beam.runners': logging.CRITICAL}
    saved = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def _writes_to_fd2(stream):
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a notebook's stream has no descriptor
        return False


def build(input: str | None = None, output: str | None = None, *,  # pylint: disable=redefined-builtin
          beam_options: typing.Sequence[str] | None = None, **options: typing.Any) -> dict | None:
    """Builds a dataset from Python, as ``build-dataset`` does; returns the published dataset.json (a dict).

    Takes the command line's options as keyword arguments, by the same names and with the same defaults
    (the same parser reads them): ``build(input='photos', output='datasets/photos', image_size=224,
    splits={'train': 80, 'validation': 20}, formats=['tfrecord', 'array_record'], full=True)``; Beam's own
    options as ``beam_options=['--direct_num_workers=2']``. A refresh that changed nothing returns the
    version LATEST names; a Dataflow job not waited for (or a template) returns None.
    Raises ``imgrec.console.errors.UserError`` for a mistake and ``BuildFailed`` for a build that could not
    publish (both ``CommandError``: ``str()`` is the one-line message). Beam's warnings and the local
    workers' output are not shown (``verbose=True`` shows them); it never exits the interpreter.
    """
    argv = build_argv(dict(options, input=input, output=output)) + list(beam_options or ())
    verbose = bool(options.get('verbose'))
    with _quiet_beam_logs(verbose):
        config, facts, pipeline = parse(argv)
        local = is_local(pipeline)
        if local:
            internals.check(internals.needed(local_worker_count(pipeline), config.progress))
        if _writes_to_fd2(sys.stderr):  # a terminal or a log: progress lines must get past the held fd 2
            progress.keep_stderr()
        with held_stderr(local and not verbose) as held:
            try:
                config, facts, result = launch(config, facts, pipeline)
            except CommandError:
                raise
            except Exception as error:  # a runner wraps our BuildFailed in its own exception types
                message = build_failure_message(error)
                if message is None:
                    held.replay()  # an unexpected failure: the workers' own lines may say why
                    raise
                raise BuildFailed(message) from None
    document = _published(config, facts, result, pipeline)
    return None if document is None else BuildResult(document, report(config, facts, result, pipeline))


def _published(config, facts, result, options):
    """The dataset.json a finished build leaves LATEST naming; None for a job not waited for."""
    if options.view_as(GoogleCloudOptions).template_location or (
            getattr(result, 'has_job', False) and options.view_as(StandardOptions).no_wait_until_finish):
        return None
    version_dir = config.version_dir
    if unchanged(result):
        version_dir = layout.join(config.output, facts.refresh.previous)
    path = layout.join(version_dir, layout.DATASET_JSON)
    return version_ref.parse_document(preflight.job_storage(path, config, options).read(path), path)

