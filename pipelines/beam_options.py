"""Beam's options for a build: the local runner's defaults, Dataflow's requirements, and Beam's own check of
the values left for it (their names were checked before Beam loaded: ``imgrec.pipelines.options``).
"""
import os

import apache_beam as beam
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
from imgrec.console.errors import UserError
from imgrec.pipelines import beam_names
from imgrec.pipelines.local import internals
from imgrec.pipelines.config import BuildConfig
from imgrec.pipelines.options import DATAFLOW_RUNNER, DIRECT_RUNNER, runner_name
from imgrec.storage import storage
from imgrec.transforms.listing import is_image_name

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
# Chosen with benchmarks/startup.py --threshold, where the two modes cross (figures: docs/benchmarks.md).
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
