"""Command-line options of the build job, parsed and checked apart from the graph.

Every option the job does not know is left for Beam (``--runner``, ``--direct_num_workers``,
Dataflow's options...). A mistake raises UsageError with a one-line message.
"""
import argparse
import dataclasses
import datetime
import os
import re

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions
from google.api_core.exceptions import GoogleAPICallError

from contract import layout
from transforms import gcs, image_ops
from transforms.listing import is_image_name, iter_files, list_top_level, parse_manifest_line

DEFAULT_SPLITS = 'train=90,validation=10'
_VERSION = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')


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

    @property
    def version_dir(self):
        return layout.join(self.output, self.version)

    def describe(self):
        """The options as recorded in dataset.json."""
        options = dataclasses.asdict(self)
        del options['created']  # the document's own field, not a choice of the user's
        options['image_size'] = list(self.image_size)
        options['splits'] = dict(self.splits)
        options['labels'] = list(self.labels) if self.labels else None
        return options


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _parser():
    parser = _Parser(prog='build-dataset', description='Build labelled images into balanced TFRecord shards.')
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--input', help='folder or gs:// prefix holding <class>/<image> files')
    source.add_argument('--manifest', help='CSV file of path,label lines (local or gs://)')
    parser.add_argument('--output', required=True, help='folder or gs:// prefix; versions go below it')
    parser.add_argument('--image_size', default='192', help='N or HxW (height x width); default 192')
    parser.add_argument('--resize', choices=image_ops.RESIZE_MODES, default='crop',
                        help='crop: fill and centre-crop (default); pad: fit and pad; stretch: ignore aspect')
    parser.add_argument('--jpeg_quality', type=int, default=90, help='1-100, default 90')
    parser.add_argument('--splits', default=DEFAULT_SPLITS, help=f'NAME=WEIGHT,... default {DEFAULT_SPLITS}')
    shards = parser.add_mutually_exclusive_group()
    shards.add_argument('--target_shard_mb', type=float, default=100.0, help='shard size to aim for')
    shards.add_argument('--num_shards', help='NAME=N,... fixed shard counts; other splits use the target size')
    parser.add_argument('--labels', dest='labels_file', help='file of class names, one a line: pins label order')
    parser.add_argument('--version', help='version folder name; default: UTC time YYYYMMDDTHHMMSSZ')
    parser.add_argument('--name', help='dataset name recorded in dataset.json; default: the input folder name')
    parser.add_argument('--max_pixels', type=int, default=image_ops.DEFAULT_MAX_PIXELS,
                        help='refuse images with more pixels than this, before decoding them')
    parser.add_argument('--min_size', type=int, default=1, help='refuse images whose short side is smaller')
    parser.add_argument('--max_error_rate', type=float, default=0.05,
                        help='fail the build, without publishing, when more than this fraction of the input '
                             'images is quarantined; default 0.05 (5%%)')
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


def _read_labels(path):
    if not FileSystems.exists(path):
        raise UsageError(f'--labels file not found: {path}')
    with FileSystems.open(path) as stream:
        labels = [line.strip() for line in stream.read().decode('utf-8').splitlines() if line.strip()]
    if not labels:
        raise UsageError(f'--labels file is empty: {path}')
    if len(set(labels)) != len(labels):
        raise UsageError(f'--labels file names a class twice: {path}')
    return tuple(labels)


def _first_image_on_gcs(storage_client, root):
    """True once any class folder below the gs:// ``root`` holds an image; stops at the first one."""
    for kind, folder in list_top_level(root, storage_client):
        if kind == gcs.PREFIX and any(is_image_name(path) for path in iter_files(folder, storage_client)):
            return True
    return False


def check_input(config, options=None):
    """Fails fast, before any worker starts, on an input that is missing, unreadable or holds no image.

    ``options`` (the job's PipelineOptions) make the gs:// checks authenticate as the job will.
    """
    if config.manifest:
        if gcs.is_gcs(config.manifest):
            _check_gcs(config.manifest, options)
        if not FileSystems.exists(config.manifest):
            raise UsageError(f'manifest not found: {config.manifest}')
        with FileSystems.open(config.manifest) as stream:
            for line in stream:
                try:
                    if parse_manifest_line(line.decode('utf-8'), '.') is not None:
                        return
                except ValueError:
                    continue
        raise UsageError(f'manifest lists no image: {config.manifest}')
    no_images = (f'no images found under {config.input} (expected <class>/<image> files with extensions '
                 f'jpg, jpeg, png, gif, bmp, webp, tif or tiff)')
    if gcs.is_gcs(config.input):
        if not _check_gcs(config.input, options, _first_image_on_gcs):
            raise UsageError(no_images)
        return
    if FileSystems.get_scheme(config.input) is None:
        if not os.path.isdir(config.input):
            raise UsageError(f'input folder not found: {config.input}')
        for directory, _, names in os.walk(config.input):
            if directory != config.input and any(is_image_name(name) for name in names):
                return
        raise UsageError(no_images)


def _check_gcs(url, options, probe=gcs.check_readable):
    """Returns ``probe(client, url)``, turning a GCS error (missing bucket, no permission) into a UsageError."""
    try:
        return probe(gcs.client(options), url)
    except GoogleAPICallError as error:
        raise UsageError(gcs.describe_error(url, error)) from None


def check_temp_locations(options):
    """Refuses a gs:// --temp_location or --staging_location whose bucket cannot be read.

    Dataflow would otherwise retry staging the job's files there for minutes before failing.
    """
    cloud = options.view_as(GoogleCloudOptions)
    for location in (cloud.temp_location, cloud.staging_location):
        if location and gcs.is_gcs(location):
            _check_gcs(location, options)


def check_output(config, options=None):
    """Refuses an output bucket that cannot be read, and a version that was already published."""
    if gcs.is_gcs(config.output):
        _check_gcs(config.output, options)
    if FileSystems.exists(layout.join(config.version_dir, layout.DATASET_JSON)):
        raise UsageError(f'version {config.version} already exists in {config.output}; pass another --version')


def parse_args(argv, now=None):
    """Returns (BuildConfig, the arguments left for Beam)."""
    args, beam_args = _parser().parse_known_args(argv)
    try:
        image_size = image_ops.parse_image_size(args.image_size)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not 1 <= args.jpeg_quality <= 100:
        raise UsageError(f'--jpeg_quality must be between 1 and 100, got {args.jpeg_quality}')
    if args.target_shard_mb <= 0:
        raise UsageError(f'--target_shard_mb must be positive, got {args.target_shard_mb}')
    if args.max_pixels < 1 or args.min_size < 1:
        raise UsageError('--max_pixels and --min_size must be at least 1')
    if not 0 <= args.max_error_rate <= 1:
        raise UsageError(f'--max_error_rate is a fraction between 0 and 1 (0.05 is 5%), got {args.max_error_rate}')
    splits = _parse_pairs(args.splits, '--splits')
    num_shards = dict(_parse_pairs(args.num_shards, '--num_shards')) if args.num_shards else None
    unknown = sorted(set(num_shards or ()) - {name for name, _ in splits})
    if unknown:
        raise UsageError(f"--num_shards names split(s) not in --splits: {', '.join(unknown)}")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    version = args.version or now.strftime(layout.VERSION_FORMAT)
    if not _VERSION.match(version):
        raise UsageError(f'--version may hold letters, digits, _, . and - only, got {version!r}')
    source = args.input or args.manifest
    config = BuildConfig(
        input=args.input, manifest=args.manifest, output=args.output, version=version,
        created=now.strftime('%Y-%m-%dT%H:%M:%SZ'), image_size=image_size, splits=splits,
        resize=args.resize, jpeg_quality=args.jpeg_quality, target_shard_mb=args.target_shard_mb,
        num_shards=num_shards, labels=_read_labels(args.labels_file) if args.labels_file else None,
        labels_file=args.labels_file, max_pixels=args.max_pixels, min_size=args.min_size,
        max_error_rate=args.max_error_rate,
        name=args.name or os.path.basename(source.rstrip('/')).rsplit('.', 1)[0] or 'dataset')
    return config, beam_args
