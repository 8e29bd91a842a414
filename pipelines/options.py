"""Command-line options of the build job, parsed apart from the graph, from any I/O, and before Beam is
loaded (``build-dataset --help`` and a mistake in the options take no second of Beam's imports).

Every option the job does not know is left for Beam (``--runner``, ``--direct_num_workers``,
Dataflow's options...): its name is checked here against Beam's (``imgrec.pipelines.beam_names``), its value by
Beam's own parser once Beam is loaded (``imgrec.pipelines.build_dataset``). A mistake raises UserError with a
one-line message. Checks that need the file system or the network (inputs, outputs, buckets, the labels
file) are ``imgrec.pipelines.preflight``'s.
"""
import dataclasses
import datetime
import difflib
import math
import os
import re
import typing
import uuid

from imgrec.contract import layout, version_ref
from imgrec.contract.layout import MAX_SHARDS
from imgrec.contract.metadata import NEAR_DUPLICATE_CONFLICTS, NEAR_DUPLICATE_MODES
from imgrec.console.arguments import Parser, is_number
from imgrec.console.errors import UserError
from imgrec.imaging import image_ops
from imgrec.imaging.record_options import RecordOptions
from imgrec.storage import paths
from imgrec.pipelines import beam_names

if typing.TYPE_CHECKING:  # for annotations only (imgrec.pipelines.refresh imports this module; the others load Beam)
    from imgrec.storage import retries
    from imgrec.storage.publication import Latest
    from imgrec.pipelines.refresh import RefreshPlan
    from imgrec.transforms.sharding import ShardConfig

DEFAULT_SPLITS = 'train=90,validation=10'
# --retry_deadline's default as --help states it: the storage layer's (``retries.DEFAULT_DEADLINE_S``, which
# is not imported here: it loads Google's clients; tests/test_cli_errors.py holds the two to each other).
RETRY_DEADLINE_HELP = 300
MAX_IMAGE_SIDE = 8192
_VERSION = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')  # fullmatch: '$' would let 'v2\n' through
# Runner names, compared case-insensitively, and the name Beam is given for each.
_RUNNERS = {'directrunner': 'DirectRunner', 'direct': 'DirectRunner',
            'dataflowrunner': 'DataflowRunner', 'dataflow': 'DataflowRunner'}
DIRECT_RUNNER = 'DirectRunner'
DATAFLOW_RUNNER = 'DataflowRunner'


# Marks an option that says how the build runs, reports, retries or cleans up: it never shapes the
# dataset, so dataset.json does not record it.
_RUN_OPTION = {'recorded': False}


def _run_option(default):
    return dataclasses.field(default=default, metadata=_RUN_OPTION)


@dataclasses.dataclass(frozen=True)
class BuildConfig:
    """The user's options, as the command line gives them (and ``labels`` as the --labels file does).

    What one run finds or decides (its start time, staging folder, LATEST, refresh plan) is ``RunFacts``.
    """
    output: str
    version: str
    record_options: RecordOptions  # what shapes each record's bytes: --image_size, --resize...
    splits: tuple[tuple[str, int], ...]  # ((name, weight), ...)
    input: str | None = None
    manifest: str | None = None
    target_shard_mb: float = 100.0
    num_shards: dict[str, int] | None = None  # split -> count; splits not named follow target_shard_mb
    labels: tuple[str, ...] | None = None  # pinned class order, read from --labels by the pre-flight checks
    labels_file: str | None = None
    max_error_rate: float = 0.05
    name: str = ''
    allow_unknown_labels: bool = False  # with --labels: drop images of other classes instead of failing
    near_duplicates: str = 'group'  # group: keep each group of near-duplicates in one split; report; off
    near_duplicate_conflicts: str = 'keep'  # keep: write both images of a pair under two labels (listed); quarantine
    stratify: bool = False  # deal each class's images to the splits by their weights
    formats: tuple[str, ...] = (layout.TFRECORD,)  # shard formats written (layout.FORMATS order); TFRecord always
    split_tolerance: float = _run_option(1.0)  # percentage points a split's share may miss its weight by
    resplit: bool = _run_option(False)  # deal every image again, published ones too
    full: bool = _run_option(False)  # decode everything, even what the previous version could give
    force: bool = _run_option(False)  # publish a new version even when nothing changed
    keep_versions: int | None = _run_option(None)  # after publishing, delete all but this many newest versions
    clean: bool = _run_option(False)  # remove every staging folder a failed or killed build left
    verbose: bool = _run_option(False)  # show Beam's and the workers' own messages, and tracebacks
    retry_deadline: float = _run_option(None)  # seconds a failing operation is retried for; None: the storage layer's
    progress: bool = _run_option(True)  # print progress lines while the build runs
    progress_interval: float = _run_option(10.0)

    def retry_policy(self) -> 'retries.RetryPolicy':
        from imgrec.storage import retries  # pylint: disable=import-outside-toplevel  # Google's clients: 0.4 s
        return retries.default_policy(self.retry_deadline)

    @property
    def version_dir(self) -> str:
        return layout.join(self.output, self.version)

    def shard_config(self) -> 'ShardConfig':
        from imgrec.transforms.sharding import ShardConfig  # pylint: disable=import-outside-toplevel  # Beam's module
        return ShardConfig(fixed=dict(self.num_shards or {}), target_bytes=self.target_shard_mb * 1e6)

    def describe(self) -> dict[str, typing.Any]:
        """The options dataset.json records: all but the run options, the record options among them (which it
        records in ``record_options`` only: ``imgrec.contract.metadata.build_metadata``)."""
        options = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                   if field.metadata.get('recorded', True)}
        options.update(dataclasses.asdict(options.pop('record_options')))
        options['image_size'] = list(options['image_size'])
        options['splits'] = dict(self.splits)
        options['num_shards'] = dict(self.num_shards) if self.num_shards is not None else None
        options['labels'] = list(self.labels) if self.labels else None
        options['formats'] = list(self.formats)
        return options


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What one run of the build found or decided: none of it is an option, none is in dataset.json's."""
    created: str  # when the options were parsed (UTC); dataset.json's 'created'
    build_id: str  # names this run's staging folder
    previous: 'Latest | None' = None  # what LATEST named when the build started (pre-flight)
    refresh: 'RefreshPlan | None' = None  # decided before the job runs
    decoders: int = 0  # threads each decoding DoFn hands the pixel work to (imgrec.transforms.decode): local in_memory runs

    @classmethod
    def start(cls, now: datetime.datetime | None = None) -> 'RunFacts':
        """The facts known when the options are parsed, at ``now`` (the time ``parse_args`` was given)."""
        now = now or utc_now()
        return cls(created=now.strftime('%Y-%m-%dT%H:%M:%SZ'), build_id=uuid.uuid4().hex[:12])

    def staging_dir(self, config: BuildConfig) -> str:
        """This run's staging folder in ``config.output``, where the version is written before it is published."""
        return layout.join(config.output, layout.staging_name(config.version, self.build_id))


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def check_beam_names(beam_args, parser, beam_options):
    """Refuses an option that neither the build (``parser``) nor Beam (``beam_options``, its '--NAME's) knows,
    naming the closest of both, and an argument that follows no option. Beam's values are Beam's to check.
    """
    follows_option = False
    for arg in beam_args:
        if arg == '--':
            return
        name = arg.split('=', 1)[0]
        if arg.startswith('-') and not is_number(arg):
            if name not in beam_options:
                raise parser.unknown_option(name, sorted(beam_options))
            follows_option = '=' not in arg  # the next argument may be its value
        elif follows_option:
            follows_option = False
        else:
            raise UserError(f'unexpected argument {arg!r}')


# Runners that hand the job to a job server: without --job_endpoint, Beam downloads one at run time (a Flink or
# Spark job server jar, run with Java, or the Prism binary).
_JOB_SERVER_RUNNERS = ('FlinkRunner', 'SparkRunner', 'PrismRunner', 'PortableRunner', 'KafkaStreamsRunner')


def check_runner(beam_args, runners):
    """Refuses, before anything runs, a runner Beam does not know (``runners``: its names) and one that would
    download its job server."""
    runner = runner_name(beam_args, runners)
    if '.' in runner:  # a PipelineRunner class by its module path: Beam imports it
        return
    if runner not in runners:
        stem = lambda name: name.lower().removesuffix('runner')  # noqa: E731
        known = {stem(name): name for name in runners}
        close = difflib.get_close_matches(stem(runner), list(known), n=1)
        hint = f' (did you mean {known[close[0]]}?)' if close else ''
        raise UserError(f'--runner {runner} is not a Beam runner{hint}; this build runs on {DIRECT_RUNNER} or '
                        f'{DATAFLOW_RUNNER}')
    if runner in _JOB_SERVER_RUNNERS and not _option_value(beam_args, '--job_endpoint'):
        raise UserError(f'--runner {runner} needs --job_endpoint HOST:PORT of a running job server: without one, '
                        f'Beam downloads a job server at run time; this build runs on {DIRECT_RUNNER} (the default) '
                        f'or {DATAFLOW_RUNNER}')


def _option_value(args, option):
    """The last value given to ``option`` (``--option value`` or ``--option=value``) in ``args``, or None."""
    value = None
    for arg, following in zip(args, args[1:] + [None]):
        if arg == option:
            value = following
        elif arg.startswith(option + '='):
            value = arg.split('=', 1)[1]
    return value


_EPILOG = """\
Every other option goes to Apache Beam, for example:
  --runner                 DirectRunner (default: multi-processing, one worker per core) or DataflowRunner
  --direct_running_mode    in_memory: in this process, decoding on a thread per core (less CPU and memory)
  --direct_num_workers     local worker processes
  --project, --region      the Google Cloud project and region of a Dataflow job
  --temp_location          gs:// folder for Dataflow's temporary and staged files
A misspelt option is an error, with the closest match.

examples:
  build-dataset --input photos/ --output datasets/photos --image_size 224
  build-dataset --input gs://BUCKET/photos --output gs://BUCKET/datasets/photos --image_size 224 \\
      --runner DataflowRunner --project PROJECT --region europe-west4 --temp_location gs://BUCKET/tmp
"""


def _parser():
    parser = Parser(prog='build-dataset', description='Build labelled images into balanced TFRecord shards.',
                    epilog=_EPILOG, passes_on=True)
    source = parser.add_exclusive_group(required=True)
    source.add_argument('--input', help='folder or gs:// prefix holding <class>/<image> files')
    source.add_argument('--manifest', help='CSV file of path,label lines (local or gs://)')
    parser.add_argument('--output', required=True, help='folder or gs:// prefix; versions go below it')
    parser.add_argument('--image_size', default='192', help='N or HxW (height x width), at most 8192 a side')
    parser.add_argument('--resize', choices=image_ops.RESIZE_MODES, default='crop',
                        help='crop: fill and centre-crop; pad: fit and pad; stretch: ignore aspect')
    parser.add_argument('--jpeg_quality', type=int, default=90, help='quality of the re-encoded JPEGs, 1-100')
    parser.add_argument('--splits', default=DEFAULT_SPLITS, help='NAME=WEIGHT,...: split names and weights')
    parser.add_argument('--target_shard_mb', type=float, default=100.0,
                        help='shard size to aim for, in MB; a split of a few thousand images still gets '
                             '16 shards (of at least 64 records each) for parallel reads')
    parser.add_argument('--num_shards', help='NAME=N,... fixed shard counts (at most 10000); other splits follow '
                                             '--target_shard_mb (default: none fixed)')
    parser.add_argument('--labels', dest='labels_file',
                        help='file of class names, one a line: pins the label order (default: the previous '
                             "version's order, new classes appended in sorted order)")
    parser.add_argument('--version', help='version folder name (default: the UTC time, YYYYMMDDTHHMMSSZ)')
    parser.add_argument('--name', help='dataset name recorded in dataset.json (default: the input folder name)')
    parser.add_argument('--max_pixels', type=int, default=image_ops.DEFAULT_MAX_PIXELS,
                        help='refuse images with more pixels than this, before decoding them')
    parser.add_argument('--min_size', type=int, default=1, help='refuse images whose short side is smaller')
    parser.add_switch('--full',
                      help='decode every image, even when the previous version (LATEST) could give its record')
    parser.add_switch('--force',
                      help='publish a new version even when nothing changed since the previous one')
    parser.add_argument('--keep_versions', type=int,
                        help='after every build, keep the N newest versions (the one LATEST names among them) '
                             'and those a live lease holds, and delete the rest (default: keep every version)')
    parser.add_switch('--clean',
                      help='remove the staging folders that failed or killed builds left in --output')
    parser.add_argument('--near_duplicates', choices=NEAR_DUPLICATE_MODES, default='group',
                        help='group: find near-duplicate images (re-saved, resized, cropped, brightened, '
                             'captioned copies) and keep each group in one split; report: only list them in '
                             'near_duplicates.jsonl; off: do not look')
    parser.add_argument('--near_duplicate_conflicts', choices=NEAR_DUPLICATE_CONFLICTS, default='keep',
                        help='what to do with a near-duplicate pair filed under two labels (not the same bytes: '
                             'those are label_conflict, always quarantined). keep: write both images, in one '
                             'split, and list the pair in dataset.json, the summary and the report\'s Warnings; '
                             'quarantine: remove BOTH images of every such pair from the dataset (quarantined as '
                             'near_duplicate_label_conflict, counted by --max_error_rate)')
    parser.add_switch('--stratify',
                      help="give each split its share of every class, within one image (or one group); "
                           'adding images can then move others to another split')
    parser.add_argument('--split_tolerance', type=float, default=1.0, metavar='POINTS',
                        help='fail the build, before publishing, when a split\'s share of the images misses its '
                             'weight by more than this many percentage points (and more than one image)')
    parser.add_switch('--resplit',
                      help='deal every image to the splits again, as a first build would, instead of '
                           'keeping each published image in the split it was published in')
    parser.add_argument('--formats', default=layout.TFRECORD,
                        help='shard formats, comma-separated: tfrecord, or tfrecord,array_record to also write '
                             'each shard as ArrayRecord (the same records, for Grain and random access; '
                             'docs/array-record.md)')
    parser.add_switch('--allow_unknown_labels',
                      help='with --labels: quarantine images of classes not in the file (unknown_label) '
                           'instead of failing the build')
    parser.add_argument('--retry_deadline', type=float, metavar='SECONDS',
                        help='seconds a failing read, write or listing is retried for (timeouts, 5xx, 429, '
                             f'resets) before the build fails (default: {RETRY_DEADLINE_HELP})')
    parser.add_switch('--progress', default=True,
                      help='progress lines (stage, counts, rate, ETA) on stderr; --no_progress: none')
    parser.add_argument('--progress_interval', type=float, default=10.0,
                        help='seconds between progress lines')
    parser.add_switch('--verbose',
                      help="show Beam's and the workers' own log lines, and a failure's traceback")
    parser.add_argument('--max_error_rate', type=float, default=0.05,
                        help='fail the build, without publishing, when more than this fraction of the input '
                             'images is quarantined (0.05 is 5%%)')
    return parser


def own_options():
    """{name: argparse action} of the build's own options, by their command-line names without '--'."""
    return {action.option_strings[0][2:]: action for action in _parser().actions
            if '--help' not in action.option_strings}


def _parse_pairs(text, option):
    """'a=1,b=2' -> (('a', 1), ('b', 2)), checked."""
    pairs = []
    for item in text.split(','):
        name, equals, value = item.strip().partition('=')
        if not equals or not layout.SPLIT_NAME.match(name) or not value.strip().isdigit():
            raise UserError(f'{option} must look like train=90,validation=10 (names of letters, digits, _), '
                             f'got {text!r}')
        pairs.append((name, int(value)))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UserError(f'{option} names a split twice: {text!r}')
    if any(value < 1 for _, value in pairs):
        raise UserError(f'{option} values must be at least 1, got {text!r}')
    return tuple(pairs)


def parse_formats(text):
    """'tfrecord,array_record' -> ('tfrecord', 'array_record'), checked, in ``layout.FORMATS`` order."""
    names = [name.strip().lower() for name in text.split(',')]
    unknown = [name for name in names if name not in layout.FORMATS]
    if unknown:
        raise UserError(f"--formats: unknown format {unknown[0]!r}: choose from {', '.join(layout.FORMATS)}")
    if len(set(names)) != len(names):
        raise UserError(f'--formats names a format twice: {text!r}')
    if layout.TFRECORD not in names:
        raise UserError(f'--formats must include {layout.TFRECORD}: the record index, refreshes and training read '
                        f'the TFRecord shards (--formats {layout.TFRECORD},{layout.ARRAY_RECORD} writes both)')
    return tuple(name for name in layout.FORMATS if name in names)


def runner_name(beam_args, runners=None):
    """The runner the job runs on, decided once: Beam's name for it, DirectRunner when none is given.

    Names are compared case-insensitively, with or without 'Runner' (``directrunner``, ``direct``,
    ``Dataflow``, ``flink``), as Beam compares them; a name Beam does not know (``runners``, by default the
    installed Beam's) is returned as given.
    """
    runner = _option_value(list(beam_args), '--runner')
    if runner is None:
        return DIRECT_RUNNER
    lower = runner.lower()
    known = {name.lower(): name for name in (runners or beam_names.known()[1])}
    return _RUNNERS.get(lower) or known.get(lower) or known.get(lower + 'runner') or runner


def parse_args(argv: typing.Sequence[str] | None, now: datetime.datetime | None = None) -> tuple[BuildConfig, list[str]]:
    """Returns (BuildConfig, the arguments left for Beam); ``now`` names the version when --version does not."""
    parser = _parser()
    args, beam_args = parser.parse_known_args(argv)
    beam_options, runners = beam_names.known()
    check_beam_names(beam_args, parser, beam_options)
    check_runner(beam_args, runners)
    if not args.output.strip() or paths.is_local_root(args.output):
        raise UserError(f'--output must name a folder or gs:// prefix below the root, got {args.output!r}')
    try:
        image_size = image_ops.parse_image_size(args.image_size)
    except ValueError as error:
        raise UserError(str(error)) from None
    if max(image_size) > MAX_IMAGE_SIDE:
        raise UserError(f'--image_size must be at most {MAX_IMAGE_SIDE} a side, got {args.image_size!r}')
    if not 1 <= args.jpeg_quality <= 100:
        raise UserError(f'--jpeg_quality must be between 1 and 100, got {args.jpeg_quality}')
    if args.target_shard_mb <= 0:
        raise UserError(f'--target_shard_mb must be positive, got {args.target_shard_mb}')
    if args.max_pixels < 1 or args.min_size < 1:
        raise UserError('--max_pixels and --min_size must be at least 1')
    if not 0 < args.progress_interval < math.inf:
        raise UserError(f'--progress_interval must be a positive number of seconds, got {args.progress_interval}')
    if args.retry_deadline is not None and not 0 < args.retry_deadline < math.inf:
        raise UserError(f'--retry_deadline must be a positive number of seconds, got {args.retry_deadline}')
    if args.keep_versions is not None and args.keep_versions < 1:
        raise UserError(f'--keep_versions must be at least 1, got {args.keep_versions}')
    if not 0 <= args.max_error_rate <= 1:
        raise UserError(f'--max_error_rate is a fraction between 0 and 1 (0.05 is 5%), got {args.max_error_rate}')
    splits = _parse_pairs(args.splits, '--splits')
    num_shards = dict(_parse_pairs(args.num_shards, '--num_shards')) if args.num_shards else None
    too_many = sorted(name for name, count in (num_shards or {}).items() if count > MAX_SHARDS)
    if too_many:
        raise UserError(f"--num_shards allows at most {MAX_SHARDS} shards a split: {', '.join(too_many)}")
    unknown = sorted(set(num_shards or ()) - {name for name, _ in splits})
    if unknown:
        raise UserError(f"--num_shards names split(s) not in --splits: {', '.join(unknown)}")
    now = now or utc_now()
    version = args.version if args.version is not None else now.strftime(layout.VERSION_FORMAT)
    try:
        version_ref.check_version_name(version, '--version')  # the rule every reader of LATEST applies
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None
    if not _VERSION.fullmatch(version):
        raise UserError(f'--version may hold letters, digits, _, . and - only, and start with a letter or '
                         f'digit, got {version!r}')
    formats = parse_formats(args.formats)
    source = args.input or args.manifest
    record_options = RecordOptions(image_size=image_size, resize=args.resize, jpeg_quality=args.jpeg_quality,
                                   max_pixels=args.max_pixels, min_size=args.min_size)
    config = BuildConfig(
        input=args.input, manifest=args.manifest, output=args.output, version=version,
        record_options=record_options, splits=splits, target_shard_mb=args.target_shard_mb,
        num_shards=num_shards, labels_file=args.labels_file,
        max_error_rate=args.max_error_rate, allow_unknown_labels=args.allow_unknown_labels,
        near_duplicates=args.near_duplicates,
        near_duplicate_conflicts=args.near_duplicate_conflicts, stratify=args.stratify, formats=formats,
        split_tolerance=args.split_tolerance, resplit=args.resplit,
        name=args.name or os.path.basename(source.rstrip('/')).rsplit('.', 1)[0] or 'dataset',
        full=args.full, force=args.force, keep_versions=args.keep_versions, clean=args.clean,
        verbose=args.verbose, retry_deadline=args.retry_deadline,
        progress=args.progress, progress_interval=args.progress_interval)
    return config, beam_args
