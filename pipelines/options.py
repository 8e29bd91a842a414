"""Command-line options of the build job, parsed apart from the graph, from any I/O, and before Beam is
loaded (``build-dataset --help`` and a mistake in the options take no second of Beam's imports).

Every option the job does not know is left for Beam (``--runner``, ``--direct_num_workers``,
Dataflow's options...): its name is checked here against Beam's (``imgrec.pipelines.beam_names``), its value by
Beam's own parser once Beam is loaded (``imgrec.pipelines.build_dataset``). A mistake raises UserError with a
one-line message. Checks that need the file system or the network (inputs, outputs, buckets, the labels
file) are ``imgrec.pipelines.preflight``'s.
"""
import datetime
import difflib
import os
import sys
import typing

from imgrec.contract import layout
from imgrec.contract.metadata import NEAR_DUPLICATE_CHECKS, NEAR_DUPLICATE_CONFLICTS, NEAR_DUPLICATE_MODES
from imgrec.console.arguments import Parser, is_number
from imgrec.console.errors import UserError
from imgrec.imaging import image_ops
from imgrec.imaging.record_options import MAX_IMAGE_SIDE, RecordOptions  # noqa: F401  (MAX_IMAGE_SIDE: its old home)
from imgrec.pipelines import beam_names
from imgrec.pipelines.config import BuildConfig, utc_now


DEFAULT_SPLITS = 'train=90,validation=10'
# --retry_deadline's default as --help states it: the storage layer's (``retries.DEFAULT_DEADLINE_S``, which
# is not imported here: it loads Google's clients; tests/test_cli_errors.py holds the two to each other).
RETRY_DEADLINE_HELP = 300
# Runner names, compared case-insensitively, and the name Beam is given for each.
_RUNNERS = {'directrunner': 'DirectRunner', 'direct': 'DirectRunner',
            'dataflowrunner': 'DataflowRunner', 'dataflow': 'DataflowRunner'}
DIRECT_RUNNER = 'DirectRunner'
DATAFLOW_RUNNER = 'DataflowRunner'


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
  --runner                 DirectRunner (in_memory below 1,500 images, else a process per core) or DataflowRunner
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
    parser.add_switch('--resume', default=True,
                      help='take up the records a stopped run of this same build (same options, output and '
                           'previous version) left, checked, instead of decoding them again; --no_resume starts '
                           'from zero')
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
    parser.add_argument('--near_duplicate_check', choices=NEAR_DUPLICATE_CHECKS, default='exact',
                        help='how near-duplicates are found. exact: images that write the same picture (copies '
                             'saved again losslessly, in another format or with other metadata, under other '
                             'names); perceptual: also edited copies (re-compressed, resized, cropped, brightened, '
                             'captioned), each image\'s nearest by perceptual hash confirmed by a pixel check: '
                             'slower, and among thousands of images of one kind (digits, pages, icons) it may take '
                             'two distinct images for copies (docs/near-duplicates.md)')
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
    argv = list(sys.argv[1:] if argv is None else argv)
    args, beam_args = parser.parse_known_args(argv)
    beam_options, runners = beam_names.known()
    check_beam_names(beam_args, parser, beam_options)
    check_runner(beam_args, runners)
    return make_config(vars(args), given_options(parser, argv), now), beam_args


def check_beam_args(beam_args: typing.Sequence[str]) -> None:
    """Refuses, in ``build()``'s ``beam_options``, the build's own options (keyword arguments there), an option
    Beam does not know and a runner it does not know, as the command line does."""
    own = own_options()
    for arg in beam_args:
        name = arg.split('=', 1)[0]
        if name.startswith('--') and name[2:] in own:
            raise UserError(f'{name} is an option of the build, not of Beam: give it to build() as '
                            f'{name[2:]}=...')
    beam_options, runners = beam_names.known()
    check_beam_names(list(beam_args), _parser(), beam_options)
    check_runner(list(beam_args), runners)


def given_options(parser: Parser, argv: typing.Sequence[str]) -> frozenset[str]:
    """The options ``argv`` gives, by their field names (``--labels``: labels_file), whatever the spelling
    (``--no_stratify``, ``--full=false``): the others are left to a refresh to carry over."""
    dests = {option: action.dest for action in parser.actions for option in action.option_strings}
    given = set()
    for arg in argv:
        if arg == '--':
            break
        name = arg.split('=', 1)[0]
        name = '--no_' + name[len('--no-'):] if name.startswith('--no-') else name
        if name in dests:
            given.add(dests[name])
    return frozenset(given)


def defaults() -> dict[str, typing.Any]:
    """{field name: default} of every option of the build, as the command line's parser has them."""
    return {action.dest: action.default for action in _parser().actions if '--help' not in action.option_strings}


def config_from_keywords(keywords: typing.Mapping[str, typing.Any],
                         now: datetime.datetime | None = None) -> BuildConfig:
    """The BuildConfig of ``build()``'s keyword arguments, by the command line's option names and with its
    defaults; None is the default. No argv: each value is taken as Python gives it (``splits={'train': 80,
    'validation': 20}``, ``image_size=(224, 160)``) or as the command line writes it (``'train=80,...'``).
    Unknown names are a one-line UserError."""
    known = own_options()
    values = defaults()
    given = set()
    for name, value in keywords.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f' (did you mean {close[0]!r}?)' if close else ''
            raise UserError(f'build() got an unknown option {name!r}{hint}; Beam\'s own options go in '
                            f"beam_options=['--name=value', ...]")
        if value is not None:
            values[known[name].dest] = value
            given.add(known[name].dest)
    return make_config(values, frozenset(given), now)


def _converted(value, option, kind, accepted, noun):
    """``value`` (a keyword's Python value or the command line's text) as ``kind``; the same one-line
    mistakes as argparse's for text, and a clear one for a value of another type (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, accepted):
        raise UserError(f'{option} must be {noun}, got {value!r}')
    try:
        return kind(value)
    except ValueError:
        raise UserError(f'argument {option}: invalid {kind.__name__} value: {value!r}') from None


def _integer(value, option):
    return _converted(value, option, int, (int, str), 'a whole number')


def _number(value, option):
    return None if value is None else _converted(value, option, float, (int, float, str), 'a number')


def _switch(value, option):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _SWITCH_VALUES:
        return _SWITCH_VALUES[value.lower()]
    raise UserError(f'argument {option}: expected true or false, got {value!r}')


_SWITCH_VALUES = {'true': True, 'false': False, 'on': True, 'off': False}


def _pairs(value, option):
    """--splits/--num_shards as the command line writes them ('a=1,b=2'), or as Python gives them ({'a': 1})."""
    if isinstance(value, str):
        return _parse_pairs(value, option)
    if isinstance(value, dict):
        return tuple(value.items())
    if isinstance(value, (list, tuple)) and all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value):
        return tuple((name, count) for name, count in value)
    raise UserError(f'{option} must look like train=90,validation=10 (names of letters, digits, _), got {value!r}')


def _image_size(value):
    """--image_size as written ('192', '192x256'), or as Python gives it (192, (192, 256))."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    elif isinstance(value, (list, tuple)):
        value = 'x'.join(map(str, value))
    if not isinstance(value, str):
        raise UserError(f'--image_size must be N or HxW (e.g. 192 or 192x256), got {value!r}')
    try:
        return image_ops.parse_image_size(value)
    except ValueError as error:
        raise UserError(str(error)) from None


def _formats(value):
    if isinstance(value, (list, tuple)):
        value = ','.join(map(str, value))
    if not isinstance(value, str):
        raise UserError(f'--formats must look like tfrecord,array_record, got {value!r}')
    return parse_formats(value)


def _text(value, option):
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise UserError(f'{option} must be a path or name, got {value!r}')
    return None if value is None else os.fspath(value)


def make_config(values: typing.Mapping[str, typing.Any], given: frozenset[str] = frozenset(),
                now: datetime.datetime | None = None) -> BuildConfig:
    """The BuildConfig of ``values`` ({field name: value}, every option's), each as the command line writes it or
    as Python gives it; ``given``: the names given, not defaulted. Its checks are BuildConfig's and
    RecordOptions' own (``__post_init__``)."""
    now = now or utc_now()
    version = _text(values['version'], '--version')
    source = _text(values['input'], '--input') or _text(values['manifest'], '--manifest') or ''
    num_shards = values['num_shards']
    record_options = RecordOptions(
        image_size=_image_size(values['image_size']), resize=values['resize'],
        jpeg_quality=_integer(values['jpeg_quality'], '--jpeg_quality'),
        max_pixels=_integer(values['max_pixels'], '--max_pixels'), min_size=_integer(values['min_size'], '--min_size'))
    return BuildConfig(
        input=_text(values['input'], '--input'), manifest=_text(values['manifest'], '--manifest'),
        output=_text(values['output'], '--output') or '',
        version=version if version is not None else now.strftime(layout.VERSION_FORMAT),
        record_options=record_options, splits=_pairs(values['splits'], '--splits'),
        target_shard_mb=_number(values['target_shard_mb'], '--target_shard_mb'),
        num_shards=dict(_pairs(num_shards, '--num_shards')) if num_shards else None,
        labels_file=_text(values['labels_file'], '--labels'),
        max_error_rate=_number(values['max_error_rate'], '--max_error_rate'),
        allow_unknown_labels=_switch(values['allow_unknown_labels'], '--allow_unknown_labels'),
        near_duplicates=values['near_duplicates'], near_duplicate_conflicts=values['near_duplicate_conflicts'],
        near_duplicate_check=values['near_duplicate_check'],
        stratify=_switch(values['stratify'], '--stratify'),
        formats=_formats(values['formats']),
        split_tolerance=_number(values['split_tolerance'], '--split_tolerance'),
        resplit=_switch(values['resplit'], '--resplit'),
        name=_text(values['name'], '--name') or os.path.basename(source.rstrip('/')).rsplit('.', 1)[0] or 'dataset',
        full=_switch(values['full'], '--full'), resume=_switch(values['resume'], '--resume'), force=_switch(values['force'], '--force'),
        keep_versions=None if values['keep_versions'] is None else _integer(values['keep_versions'], '--keep_versions'),
        clean=_switch(values['clean'], '--clean'), verbose=_switch(values['verbose'], '--verbose'),
        retry_deadline=_number(values['retry_deadline'], '--retry_deadline'),
        progress=_switch(values['progress'], '--progress'),
        progress_interval=_number(values['progress_interval'], '--progress_interval'),
        given=given)
