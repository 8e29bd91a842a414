"""Runs a build: the pre-flight checks, the refresh plan, the job on its runner, and the one line a failure ends in.

``main`` is what ``build-dataset`` runs once its options have been checked without Beam
(``imgrec.pipelines.build_dataset``); ``imgrec.pipelines.python_api.build`` runs the same ``parse`` and
``launch`` from Python. The graph itself is ``imgrec.pipelines.graph``.
"""
import contextlib
import dataclasses
import datetime
import errno
import logging
import shutil
import sys
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
)
from apache_beam.runners.runner import PipelineResult

from imgrec.console.command import Command, failure_line, sigterm_as_interrupt, terminated, was_interrupted
from imgrec.console.errors import (
    BuildFailed,
    Incomplete,
    Interrupted,
    Terminated,
    UserError,
    build_failure_message,
)
from imgrec.pipelines import job_endpoint, preflight, progress, refresh, resume
from imgrec.pipelines.beam_options import (
    decoders,
    is_local,
    local_worker_count,
    pipeline_options,
)
from imgrec.pipelines.build_result import NothingChanged
from imgrec.pipelines.graph import build_pipeline
from imgrec.pipelines.local import internals
from imgrec.pipelines.config import BuildConfig, RunFacts, utc_now
from imgrec.pipelines.options import parse_args
from imgrec.pipelines.summary import report
from imgrec.storage import tidying
from imgrec.storage.output import Output
from imgrec.storage.retention import Retention
from imgrec.storage.staging import staged_bytes
from imgrec.versions import failed_build
from imgrec.versions.units import human_bytes


def parse(argv: typing.Sequence[str] | None) -> tuple[BuildConfig, RunFacts, PipelineOptions]:
    """(BuildConfig, RunFacts, PipelineOptions) of a command line; raises UserError."""
    now = utc_now()  # names the version (unless --version does) and is the run's 'created'
    config, beam_args = parse_args(argv, now)
    return prepare(config, beam_args, now)


def prepare(config: BuildConfig, beam_args: typing.Sequence[str],
            now: datetime.datetime) -> tuple[BuildConfig, RunFacts, PipelineOptions]:
    """(BuildConfig, RunFacts, PipelineOptions) of a checked configuration and Beam's arguments (``now``: when
    the options were taken, the run's 'created'); raises UserError."""
    beam_args = list(beam_args)
    try:
        internals.selected()  # IMGREC_BEAM_PATCHES
    except ValueError as error:
        raise UserError(str(error)) from None
    options = pipeline_options(beam_args, config)
    facts = dataclasses.replace(RunFacts.start(now), decoders=decoders(options, beam_args),
                                destination=Output(config.output, preflight.job_storage(config.output, config, options)))
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
    local, output = is_local(options), _output(facts)
    job_endpoint.check(options)
    with internals.gcs_emulator() if local else contextlib.nullcontext():
        config, latest = preflight.check(
            config, options, output, settle=lambda config, latest: refresh.carry_over(config, latest, options))
        plan = refresh.verified(config, refresh.plan(config, latest, options), options)
        facts = dataclasses.replace(facts, previous=latest, refresh=plan)
        if plan.full_reason:
            print(f'build-dataset: full build: {plan.full_reason}', flush=True)
        # Known from a listing, before any pipeline starts; a template runs nothing now, so it is always written.
        if not options.view_as(GoogleCloudOptions).template_location and \
                refresh.nothing_changed(config, plan, options):
            output.tidy(clean=config.clean, resumable=False)  # a stopped run left nothing this build needs
            return config, facts, NothingChanged(prune(config, output))
        plan, claims = resume.take_up(config, facts, options)
        facts = dataclasses.replace(facts, refresh=plan)
        with resume.held(claims, output), (internals.local_run(local_worker_count(options), config.progress)
                                            if local else contextlib.nullcontext()) as run:
            try:
                pipeline = beam.Pipeline(runner=run.runner if run else None, options=options)
            except ValueError as error:  # Beam's own checks of the options (runner name, project id...)
                raise UserError(' '.join(str(error).split())) from None
            build_pipeline(pipeline, config, facts)
            with build_lease(config, facts, options), shedding(config, facts, options), \
                    failure_report(config, facts, options), \
                    progress.Progress(pipeline, options, config.progress, config.progress_interval) as watch:
                resume.mark(config, facts, options)
                result = pipeline.run()
                if not options.view_as(StandardOptions).no_wait_until_finish:
                    watch.wait(result)
    return config, facts, result


def _output(facts: RunFacts) -> Output:
    """The output of a run whose facts ``prepare`` made (which made it once, with the job's storage)."""
    if facts.destination is None:
        raise ValueError('RunFacts without an output: make them with launcher.prepare')
    return facts.destination


def prune(config: BuildConfig, output: Output) -> Retention | None:
    """--keep_versions after a build that published nothing (the prune step's rule); None without it."""
    if not config.keep_versions:
        return None
    return output.keep_newest(config.keep_versions)


def build_lease(config, facts, options):
    """The build's lease on its staging folder (docs/publication.md), held while the job runs: renewed by
    this process while it waits, else written once to last (a Dataflow job nobody waits for). A
    template runs nothing now: no lease."""
    if options.view_as(GoogleCloudOptions).template_location:
        return contextlib.nullcontext()
    return _output(facts).lease(facts.staging_dir(config), detached=options.view_as(StandardOptions).no_wait_until_finish)


@contextlib.contextmanager
def shedding(config, facts, options):
    """A build that runs out of space gives back the bulk of its staging folder (``tidying.shed``: spill files,
    partial shards) while it still holds its lease, keeping its report and quarantine list, so a full disk never
    blocks its own rerun, and says so in one line naming the space it needs and the space free. Any other failure,
    and a stop (Ctrl-C, SIGTERM), keeps the folder as it is: the next run of the same command takes up its
    records (``imgrec.pipelines.resume``), any other build's cleanup sheds it. One that published already is left
    to ``main``."""
    try:
        yield
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt) or was_interrupted(error) or terminated():
            raise
        full, message = out_of_space(error), None
        if not full:
            raise
        try:
            output = after_failure_output(facts)
            if output.state_after_failure(config.version, facts.created) == tidying.UNPUBLISHED:
                staging = facts.staging_dir(config)
                written = staged_bytes(staging, output.storage)
                tidying.shed(staging, output.storage)
                message = space_message(config, facts, output, written, full)
        except Exception:  # pylint: disable=broad-except  # the failure's own line matters more than the shedding
            logging.getLogger(__name__).info('could not shed the staging folder', exc_info=True)
        if message is None:
            raise
        raise BuildFailed(message) from error


def after_failure_output(facts):
    """The output, for what a failed build checks and cleans: its storage retried for at most
    ``failed_build.WRITE_DEADLINE_S``, since the storage may be why it failed, and its line must not wait the
    whole --retry_deadline again."""
    output = _output(facts)
    storage = output.storage
    return dataclasses.replace(output, storage=storage.with_retry(storage.retry._replace(
        deadline_s=min(failed_build.WRITE_DEADLINE_S, storage.retry.deadline_s))))


_FULL = {errno.ENOSPC: 'No space left on device', errno.EDQUOT: 'Disk quota exceeded'}


def out_of_space(error):
    """What filled up, as the system says it ('No space left on device', 'Disk quota exceeded'), if ``error``
    (however a runner wrapped it) is a full disk or quota; else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _FULL:
            return _FULL[error.errno]
        for said in _FULL.values():
            if said in str(error):
                return said
        error = error.__cause__ or error.__context__
    return None


def space_message(config, facts, output, written, full='No space left on device'):
    """The line of a build that ran out of space: the output, the space it needs (estimated from what it had
    written when the disk filled, and the previous version's size), and the space free now that the bulk of
    its staging folder is gone."""
    previous = facts.previous.version if facts.previous else None
    previous_size = staged_bytes(output.version_dir(previous), output.storage) if previous else 0
    needed = max(written, previous_size) + preflight.MIN_FREE_BYTES
    on_disk = output.storage.local_path(output.root)
    free = shutil.disk_usage(on_disk).free if on_disk is not None else None
    basis = f'{human_bytes(written)} written when it filled'
    if previous_size:
        basis += f', version {previous} takes {human_bytes(previous_size)}'
    line = (f'out of space writing {config.output} ({full}): this build needs about {human_bytes(needed)} free ({basis}, '
            f'{preflight.MIN_FREE_BYTES // 2**20} MB kept free)')
    if free is not None:
        line += f'; {human_bytes(free)} free now that it deleted what it wrote'
    return line + '; free space and run the same command again'


def failure_report(config, facts, options):
    """A failed build's report, written into its staging folder while the build still holds its lease and
    named in the failure line (``imgrec.versions.failed_build``)."""
    return failed_build.reporting(facts.staging_dir(config), {
        'name': config.name, 'version': config.version, 'created': facts.created, 'options': config.describe(),
        'previous': facts.previous.version if facts.previous else None},
        _output(facts).storage)


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
            with sigterm_as_interrupt():  # SIGTERM stops the build as Ctrl-C does, and says what it left
                config, facts, result = launch(config, facts, options)
        except KeyboardInterrupt:
            raise stopped(left_behind(config, facts, options)) from None
        except Exception as error:  # a runner wraps our BuildFailed, and a Ctrl-C, in its own exception types
            if was_interrupted(error) or terminated():
                raise stopped(left_behind(config, facts, options)) from None
            visible = after_publication(config, facts, options, error)
            if visible is not None:
                raise visible from error
            message = build_failure_message(error)
            if message is None:
                raise
            raise BuildFailed(message) from error
        command.release(replay=True)  # warnings of a run that went well (retried reads, say) are the user's to see
        print(report(config, facts, result, options))
        return 0
    return command.status


def after_publication(config, facts, options, error):
    """The ``Incomplete`` line of a build that failed once readers could see its version (never 'failed'); None
    when it had published nothing. Promoted, but LATEST not moved (the disk filled as it was written): moved
    now if it can be, else the rerun of the same command, same --version, moves it."""
    try:
        output = after_failure_output(facts)
        state = output.state_after_failure(config.version, facts.created)
    except Exception:  # pylint: disable=broad-except  # storage gone too: the failure's own line
        return None
    cause = build_failure_message(error) or failure_line(error)
    if state == tidying.LATEST_MOVED_NOW:
        return Incomplete(f'published version {config.version}: LATEST names it, moved after the build failed to move '
                          f'it ({cause}); the steps after it (pruning, the summary) did not run: the next build '
                          f'into {config.output} prunes')
    if state == tidying.LATEST_NAMES_IT:
        return Incomplete(f'published version {config.version} (LATEST names it), then a later step failed: {cause}; '
                          f'the next build into {config.output} finishes what is left')
    if state == tidying.PUBLISHED_NOT_LATEST:
        try:
            latest = output.latest().version
        except Exception:  # pylint: disable=broad-except  # unreadable now: named as such
            latest = 'what it named'
        return Incomplete(f'version {config.version} is whole in {config.output}, but LATEST still names '
                          f'{latest or "nothing"}: {cause}; run the same command again (same --version) to '
                          f'finish the publication')
    return None


def stopped(message):
    """The one-line error of a build stopped by Ctrl-C (``interrupted``, 130) or SIGTERM (``terminated``, 143)."""
    return Terminated(message) if terminated() else Interrupted(message)


def left_behind(config, facts, options):
    """What an interrupted build leaves: whether it published, and its staging folder if it made one (read
    through the job's storage: ``options``, the job's)."""
    try:
        output = _output(facts)
        latest = output.latest().version
        published = latest == config.version
        staging = facts.staging_dir(config)
        kept = any(output.storage.for_path(staging).list_level(staging))
        promoted = not published and output.promoted_by(config.version, facts.created)
    except Exception:  # pylint: disable=broad-except  # storage gone too: say what is certain
        return f'LATEST and the staging folder of this build in {config.output} could not be checked'
    if promoted:  # readers can see it by name: never 'nothing was published'
        line = (f'version {config.version} is whole in {config.output}, but LATEST still names {latest or "nothing"}: '
                f'run the same command again (same --version) to finish the publication')
    else:
        line = f'published version {config.version} before it stopped' if published else \
            'nothing was published (LATEST is as it was)'
    if kept:
        return f'{line}; left the staging folder {staging} (a build with --clean removes it)'
    return f'{line}; no staging folder was left'
