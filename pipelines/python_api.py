"""``build(input=..., output=..., **options)``: a build from Python (a notebook), as ``build-dataset`` runs it,
returning the published dataset.json (docs/python-api.md).
"""
import contextlib
import logging
import sys
import typing

from apache_beam.options.pipeline_options import (
    GoogleCloudOptions,
    StandardOptions,
)

from imgrec.console.errors import (
    BuildFailed,
    CommandError,
    build_failure_message,
)
from imgrec.console.held_stderr import held_stderr
from imgrec.contract import layout, version_ref
from imgrec.pipelines import progress
from imgrec.pipelines.beam_options import is_local, local_worker_count
from imgrec.pipelines.build_result import BuildResult
from imgrec.pipelines.config import utc_now
from imgrec.pipelines.launcher import launch, prepare
from imgrec.pipelines.local import internals
from imgrec.pipelines.options import check_beam_args, config_from_keywords
from imgrec.pipelines.summary import report, unchanged


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
          beam_options: typing.Sequence[str] | None = None, **options: typing.Any) -> BuildResult | None:
    """Builds a dataset from Python, as ``build-dataset`` does; returns the published dataset.json (a dict).

    Takes the command line's options as keyword arguments, by the same names and with the same defaults,
    made into the same BuildConfig without a command line (``imgrec.pipelines.options.config_from_keywords``):
    ``build(input='photos', output='datasets/photos', image_size=224, splits={'train': 80, 'validation': 20},
    formats=['tfrecord', 'array_record'], full=True)``; Beam's own options as
    ``beam_options=['--direct_num_workers=2']``. An option not given (None) keeps the published version's value,
    as on the command line. A refresh that changed nothing returns the version LATEST names; a Dataflow job not
    waited for (or a template) returns None.
    Raises ``imgrec.console.errors.UserError`` for a mistake and ``BuildFailed`` for a build that could not
    publish (both ``CommandError``: ``str()`` is the one-line message). Beam's warnings and the local
    workers' output are not shown (``verbose=True`` shows them); it never exits the interpreter.
    """
    now = utc_now()
    config = config_from_keywords(dict(options, input=input, output=output), now)
    check_beam_args(list(beam_options or ()))
    with _quiet_beam_logs(config.verbose):
        config, facts, pipeline = prepare(config, list(beam_options or ()), now)
        local = is_local(pipeline)
        if local:
            internals.check(internals.needed(local_worker_count(pipeline), config.progress))
        if _writes_to_fd2(sys.stderr):  # a terminal or a log: progress lines must get past the held fd 2
            progress.keep_stderr()
        with held_stderr(local and not config.verbose) as held:
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
    assert facts.destination is not None  # made once, before the job (launcher.prepare)
    return version_ref.parse_document(facts.destination.storage.read(path), path)
