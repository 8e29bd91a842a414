"""Command-line options of the build job, parsed apart from the graph and from any I/O.

Every option the job does not know is left for Beam (``--runner``, ``--direct_num_workers``,
Dataflow's options...). A mistake raises UsageError with a one-line message. Checks that need the
file system or the network (inputs, outputs, buckets, the labels file) are ``pipelines.preflight``'s.
"""
import argparse
import dataclasses
import datetime
import difflib
import math
import os
import re
import uuid

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from contract import layout
from imgrec_imaging import image_ops
from imgrec_storage import retries
from transforms.sharding import MAX_SHARDS, ShardConfig

DEFAULT_SPLITS = 'train=90,validation=10'
MAX_IMAGE_SIDE = 8192
_VERSION = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
# Runner names, compared case-insensitively, and the name Beam is given for each.
_RUNNERS = {'directrunner': 'DirectRunner', 'direct': 'DirectRunner',
            'dataflowrunner': 'DataflowRunner', 'dataflow': 'DataflowRunner'}
DIRECT_RUNNER = 'DirectRunner'
DATAFLOW_RUNNER = 'DataflowRunner'


# Facts of this run, or how it runs, reports, retries and cleans up: not choices that shape the dataset.
_NOT_RECORDED = ('created', 'build_id', 'previous', 'refresh', 'verbose', 'retry_deadline', 'progress',
                 'progress_interval', 'full', 'force', 'keep_versions', 'clean')


class UsageError(Exception):
    """A user mistake in the options or inputs: reported in one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class BuildConfig:
    output: str
    version: str
    created: str
    image_size: tuple  # (height, width)
    splits: tuple  # ((name, weight), ...)
    input: str = None
    manifest: str = None
    resize: str = 'crop'
    jpeg_quality: int = 90
    target_shard_mb: float = 100.0
    num_shards: dict = None  # split -> count; splits not named follow target_shard_mb
    labels: tuple = None  # pinned class order, from --labels
    labels_file: str = None
    max_pixels: int = image_ops.DEFAULT_MAX_PIXELS
    min_size: int = 1
    max_error_rate: float = 0.05
    name: str = ''
    full: bool = False  # decode everything, even what the previous version could give
    force: bool = False  # publish a new version even when nothing changed
    keep_versions: int = None  # after publishing, delete all but this many newest versions
    clean: bool = False  # remove every staging folder a failed or killed build left
    build_id: str = ''  # names this build's staging folder
    previous: object = None  # publication.Latest read by the pre-flight checks: LATEST when the build started
    refresh: object = None  # refresh.RefreshPlan, decided before the job runs
    verbose: bool = False  # show Beam's and the workers' own messages, and tracebacks
    allow_unknown_labels: bool = False  # with --labels: drop images of other classes instead of failing
    retry_deadline: float = retries.DEFAULT_DEADLINE_S  # seconds a failing operation is retried for
    progress: bool = True  # print progress lines while the build runs
    progress_interval: float = 10.0

    def retry_policy(self):
        return retries.default_policy(self.retry_deadline)

    @property
    def version_dir(self):
        return layout.join(self.output, self.version)

    @property
    def staging_dir(self):
        return layout.join(self.output, layout.staging_name(self.version, self.build_id))

    def shard_config(self):
        return ShardConfig(fixed=dict(self.num_shards or {}), target_bytes=self.target_shard_mb * 1e6)

    def describe(self):
        """The options as recorded in dataset.json."""
        options = dataclasses.asdict(self)
        for field in _NOT_RECORDED:
            del options[field]
        options['image_size'] = list(self.image_size)
        options['splits'] = dict(self.splits)
        options['labels'] = list(self.labels) if self.labels else None
        return options


def _boolean(text):
    if text.lower() not in ('true', 'false'):
        raise argparse.ArgumentTypeError(f'expected true or false, got {text!r}')
    return text.lower() == 'true'


# A switch that also takes a value, as a Flex Template passes it: --full, --full=true, --full=false.
_FLAG = dict(nargs='?', const=True, default=False, type=_boolean, metavar='true|false')


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


class _BeamParser(_BeamArgumentParser):
    """Every Beam option this process knows, so a Beam option's mistake is a one-line UsageError."""

    def __init__(self):
        super().__init__(allow_abbrev=False, add_help=False)
        for cls in {str(cls): cls for cls in PipelineOptions.__subclasses__()}.values():
            cls._add_argparse_args(self)  # pylint: disable=protected-access

    def error(self, message):
        raise UsageError(message)


def check_beam_args(beam_args, own_options):
    """Refuses what neither the build nor Beam knows, naming a close match; checks Beam's values."""
    parser = _BeamParser()
    _, unknown = parser.parse_known_args(beam_args)
    known = own_options + [option for action in parser._actions for option in action.option_strings]
    for arg in unknown:
        name = arg.split('=', 1)[0]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f' (did you mean {close[0]}?)' if close else ''
        raise UsageError(f'unknown option {name}{hint}' if name.startswith('-') else f'unexpected argument {arg!r}')


_EPILOG = """\
Every other option goes to Apache Beam, for example:
  --runner                 DirectRunner (default: multi-processing, one worker per core) or DataflowRunner
  --direct_num_workers     local worker processes
  --project, --region      the Google Cloud project and region of a Dataflow job
  --temp_location          gs:// folder for Dataflow's temporary and staged files
A misspelt option is an error, with the closest match.

examples:
  build-dataset --input photos/ --output datasets/photos --image_size 224
  build-dataset --input gs://BUCKET/photos --output gs://BUCKET/datasets/photos --image_size 224 \\
      --runner DataflowRunner --project PROJECT --region europe-west4 --temp_location gs://BUCKET/tmp
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (options without one say in their help what happens instead)."""

    def _get_help_string(self, action):
        text = action.help or ''
        if action.default is False:
            text += ' (default: off)'
        elif action.default not in (None, argparse.SUPPRESS) and action.option_strings:
            text += ' (default: %(default)s)'
        return text


def _parser():
    parser = _Parser(prog='build-dataset', description='Build labelled images into balanced TFRecord shards.',
                     epilog=_EPILOG, formatter_class=_HelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
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
    parser.add_argument('--full', **_FLAG,
                        help='decode every image, even when the previous version (LATEST) could give its record')
    parser.add_argument('--force', **_FLAG,
                        help='publish a new version even when nothing changed since the previous one')
    parser.add_argument('--keep_versions', type=int,
                        help='after publishing, delete all but the N newest versions (never the one LATEST '
                             'named at the start) (default: keep every version)')
    parser.add_argument('--clean', **_FLAG,
                        help='remove the staging folders that failed or killed builds left in --output')
    parser.add_argument('--allow_unknown_labels', **_FLAG,
                        help='with --labels: quarantine images of classes not in the file (unknown_label) '
                             'instead of failing the build')
    parser.add_argument('--retry_deadline', type=float, default=retries.DEFAULT_DEADLINE_S,
                        help='seconds a failing read, write or listing is retried for (timeouts, 5xx, 429, '
                             'resets) before the build fails')
    parser.add_argument('--progress', choices=('on', 'off'), default='on',
                        help='off: no progress lines (stage, counts, rate, ETA) on stderr')
    parser.add_argument('--progress_interval', type=float, default=10.0,
                        help='seconds between progress lines')
    parser.add_argument('--verbose', **_FLAG,
                        help="show Beam's and the workers' own log lines, and a failure's traceback")
    parser.add_argument('--max_error_rate', type=float, default=0.05,
                        help='fail the build, without publishing, when more than this fraction of the input '
                             'images is quarantined (0.05 is 5%%)')
    return parser


def _parse_pairs(text, option):
    """'a=1,b=2' -> (('a', 1), ('b', 2)), checked."""
    pairs = []
    for item in text.split(','):
        name, equals, value = item.strip().partition('=')
        if not equals or not layout.SPLIT_NAME.match(name) or not value.strip().isdigit():
            raise UsageError(f'{option} must look like train=90,validation=10 (names of letters, digits, _), '
                             f'got {text!r}')
        pairs.append((name, int(value)))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UsageError(f'{option} names a split twice: {text!r}')
    if any(value < 1 for _, value in pairs):
        raise UsageError(f'{option} values must be at least 1, got {text!r}')
    return tuple(pairs)


def runner_name(beam_args):
    """The runner the job runs on, decided once: Beam's name for it, DirectRunner when none is given.

    Names are compared case-insensitively (``directrunner``, ``direct``, ``Dataflow``...); other runners
    are passed to Beam as given.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--runner')
    runner = parser.parse_known_args(beam_args)[0].runner
    if runner is None:
        return DIRECT_RUNNER
    return _RUNNERS.get(runner.lower(), runner)


def parse_args(argv, now=None):
    """Returns (BuildConfig, the arguments left for Beam)."""
    parser = _parser()
    args, beam_args = parser.parse_known_args(argv)
    check_beam_args(beam_args, [option for action in parser._actions for option in action.option_strings])
    if not args.output.strip() or ('://' not in args.output and os.path.abspath(args.output) == '/'):
        raise UsageError(f'--output must name a folder or gs:// prefix below the root, got {args.output!r}')
    try:
        image_size = image_ops.parse_image_size(args.image_size)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if max(image_size) > MAX_IMAGE_SIDE:
        raise UsageError(f'--image_size must be at most {MAX_IMAGE_SIDE} a side, got {args.image_size!r}')
    if not 1 <= args.jpeg_quality <= 100:
        raise UsageError(f'--jpeg_quality must be between 1 and 100, got {args.jpeg_quality}')
    if args.target_shard_mb <= 0:
        raise UsageError(f'--target_shard_mb must be positive, got {args.target_shard_mb}')
    if args.max_pixels < 1 or args.min_size < 1:
        raise UsageError('--max_pixels and --min_size must be at least 1')
    if not 0 < args.progress_interval < math.inf:
        raise UsageError(f'--progress_interval must be a positive number of seconds, got {args.progress_interval}')
    if not 0 < args.retry_deadline < math.inf:
        raise UsageError(f'--retry_deadline must be a positive number of seconds, got {args.retry_deadline}')
    if args.keep_versions is not None and args.keep_versions < 1:
        raise UsageError(f'--keep_versions must be at least 1, got {args.keep_versions}')
    if not 0 <= args.max_error_rate <= 1:
        raise UsageError(f'--max_error_rate is a fraction between 0 and 1 (0.05 is 5%), got {args.max_error_rate}')
    splits = _parse_pairs(args.splits, '--splits')
    num_shards = dict(_parse_pairs(args.num_shards, '--num_shards')) if args.num_shards else None
    too_many = sorted(name for name, count in (num_shards or {}).items() if count > MAX_SHARDS)
    if too_many:
        raise UsageError(f"--num_shards allows at most {MAX_SHARDS} shards a split: {', '.join(too_many)}")
    unknown = sorted(set(num_shards or ()) - {name for name, _ in splits})
    if unknown:
        raise UsageError(f"--num_shards names split(s) not in --splits: {', '.join(unknown)}")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    version = args.version or now.strftime(layout.VERSION_FORMAT)
    if not _VERSION.match(version) or layout.is_staging_name(version):
        raise UsageError(f'--version may hold letters, digits, _, . and - only (and not '
                         f'{layout.STAGING_MARK!r}), got {version!r}')
    source = args.input or args.manifest
    config = BuildConfig(
        input=args.input, manifest=args.manifest, output=args.output, version=version,
        created=now.strftime('%Y-%m-%dT%H:%M:%SZ'), image_size=image_size, splits=splits,
        resize=args.resize, jpeg_quality=args.jpeg_quality, target_shard_mb=args.target_shard_mb,
        num_shards=num_shards, labels_file=args.labels_file, max_pixels=args.max_pixels, min_size=args.min_size,
        max_error_rate=args.max_error_rate, allow_unknown_labels=args.allow_unknown_labels,
        name=args.name or os.path.basename(source.rstrip('/')).rsplit('.', 1)[0] or 'dataset',
        full=args.full, force=args.force, keep_versions=args.keep_versions, clean=args.clean,
        build_id=uuid.uuid4().hex[:12], verbose=args.verbose, retry_deadline=args.retry_deadline,
        progress=args.progress == 'on', progress_interval=args.progress_interval)
    return config, beam_args
