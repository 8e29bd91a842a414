"""The build's configuration: the user's options (``BuildConfig``) and the facts one run finds (``RunFacts``).

Parsed from the command line by ``imgrec.pipelines.options``; read by every step after it. Imports no Beam
and nothing of the steps that read it, so they can all take it.
"""
import dataclasses
import datetime
import math
import re
import typing
import uuid

from imgrec.console.errors import UserError
from imgrec.contract import layout, metadata, version_ref
from imgrec.contract.layout import MAX_SHARDS
from imgrec.imaging.record_options import RecordOptions
from imgrec.storage import paths

if typing.TYPE_CHECKING:  # for annotations only: the others load Beam or Google's clients
    from imgrec.pipelines.refresh_plan import RefreshPlan
    from imgrec.storage.output import Output
    from imgrec.storage import retries
    from imgrec.storage.latest import Latest
    from imgrec.transforms.sharding import ShardConfig


# Marks an option that says how the build runs, reports, retries or cleans up: it never shapes the
# dataset, so dataset.json does not record it.
_RUN_OPTION = {'recorded': False}


def _run_option(default):
    return dataclasses.field(default=default, metadata=_RUN_OPTION)


_VERSION = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')  # fullmatch: '$' would let 'v2\n' through
# The settings a refresh takes from the version it refreshes when they are not given (``given``): every
# recorded option but those that name the build or say what it reads (the input, the labels file).
CARRIED = ('splits', 'stratify', 'near_duplicates', 'near_duplicate_conflicts', 'near_duplicate_check', 'num_shards', 'target_shard_mb', 'formats', 'max_error_rate',
           'allow_unknown_labels')


def pairs_text(pairs: typing.Iterable[tuple[str, int]]) -> str:
    """(('train', 90), ('validation', 10)) -> 'train=90,validation=10': as --splits is written."""
    return ','.join(f'{name}={value}' for name, value in pairs)


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
    near_duplicate_check: str = 'exact'  # exact: the same picture written; perceptual: edited copies too (pixel check)
    stratify: bool = False  # deal each class's images to the splits by their weights
    formats: tuple[str, ...] = (layout.TFRECORD,)  # shard formats written (layout.FORMATS order); TFRecord always
    split_tolerance: float = _run_option(1.0)  # percentage points a split's share may miss its weight by
    resplit: bool = _run_option(False)  # deal every image again, published ones too
    full: bool = _run_option(False)  # decode everything, even what the previous version could give
    resume: bool = _run_option(True)  # take up what a stopped run of this build spilled (imgrec.pipelines.resume)
    force: bool = _run_option(False)  # publish a new version even when nothing changed
    keep_versions: int | None = _run_option(None)  # after publishing, delete all but this many newest versions
    clean: bool = _run_option(False)  # remove every staging folder a failed or killed build left
    verbose: bool = _run_option(False)  # show Beam's and the workers' own messages, and tracebacks
    retry_deadline: float = _run_option(None)  # seconds a failing operation is retried for; None: the storage layer's
    progress: bool = _run_option(True)  # print progress lines while the build runs
    progress_interval: float = _run_option(10.0)
    # The options given (on the command line, or to build()), by field name (a record option by its own):
    # the others take the previous version's values (``imgrec.pipelines.refresh.carry_over``).
    given: frozenset[str] = _run_option(frozenset())
    carried: tuple[str, ...] = _run_option(())  # the options carry_over took from the previous version

    def __post_init__(self):
        """Refuses a configuration no build can run, in the command line's one-line messages, wherever it was
        made: the command line and ``build()`` construct this alike (``imgrec.pipelines.options``)."""
        if (self.input is None) == (self.manifest is None):
            raise UserError('one of the arguments --input --manifest is required' if self.input is None else
                            'argument --manifest: not allowed with argument --input')
        if not self.output.strip() or paths.is_local_root(self.output):
            raise UserError(f'--output must name a folder or gs:// prefix below the root, got {self.output!r}')
        _check_pairs(self.splits, '--splits')
        if not self.target_shard_mb > 0:
            raise UserError(f'--target_shard_mb must be positive, got {self.target_shard_mb}')
        if not 0 < self.progress_interval < math.inf:
            raise UserError(f'--progress_interval must be a positive number of seconds, got {self.progress_interval}')
        if self.retry_deadline is not None and not 0 < self.retry_deadline < math.inf:
            raise UserError(f'--retry_deadline must be a positive number of seconds, got {self.retry_deadline}')
        if self.keep_versions is not None and self.keep_versions < 1:
            raise UserError(f'--keep_versions must be at least 1, got {self.keep_versions}')
        if not 0 <= self.max_error_rate <= 1:
            raise UserError(f'--max_error_rate is a fraction between 0 and 1 (0.05 is 5%), got {self.max_error_rate}')
        if self.num_shards is not None:
            _check_pairs(tuple(self.num_shards.items()), '--num_shards')
            too_many = sorted(name for name, count in self.num_shards.items() if count > MAX_SHARDS)
            if too_many:
                raise UserError(f"--num_shards allows at most {MAX_SHARDS} shards a split: {', '.join(too_many)}")
            unknown = sorted(set(self.num_shards) - {name for name, _ in self.splits})
            if unknown:
                raise UserError(f"--num_shards names split(s) not in --splits: {', '.join(unknown)}")
        try:
            version_ref.check_version_name(self.version, '--version')  # the rule every reader of LATEST applies
        except version_ref.VersionError as error:
            raise UserError(str(error)) from None
        if not _VERSION.fullmatch(self.version):
            raise UserError(f'--version may hold letters, digits, _, . and - only, and start with a letter or '
                            f'digit, got {self.version!r}')
        if self.near_duplicates not in metadata.NEAR_DUPLICATE_MODES:
            raise UserError(f"--near_duplicates must be one of {', '.join(metadata.NEAR_DUPLICATE_MODES)}, got "
                            f'{self.near_duplicates!r}')
        if self.near_duplicate_conflicts not in metadata.NEAR_DUPLICATE_CONFLICTS:
            raise UserError(f"--near_duplicate_conflicts must be one of {', '.join(metadata.NEAR_DUPLICATE_CONFLICTS)}, "
                            f'got {self.near_duplicate_conflicts!r}')
        if self.near_duplicate_check not in metadata.NEAR_DUPLICATE_CHECKS:
            raise UserError(f"--near_duplicate_check must be one of {', '.join(metadata.NEAR_DUPLICATE_CHECKS)}, "
                            f'got {self.near_duplicate_check!r}')
        unknown_formats = [name for name in self.formats if name not in layout.FORMATS]
        if unknown_formats:
            raise UserError(f"--formats: unknown format {unknown_formats[0]!r}: choose from "
                            f"{', '.join(layout.FORMATS)}")
        if layout.TFRECORD not in self.formats:
            raise UserError(f'--formats must include {layout.TFRECORD}: the record index, refreshes and training read '
                            f'the TFRecord shards (--formats {layout.TFRECORD},{layout.ARRAY_RECORD} writes both)')

    def retry_policy(self) -> 'retries.RetryPolicy':
        from imgrec.storage import retries  # pylint: disable=import-outside-toplevel  # Google's clients: 0.4 s
        return retries.default_policy(self.retry_deadline)

    @property
    def version_dir(self) -> str:
        return layout.join(self.output, self.version)

    def shard_config(self) -> 'ShardConfig':
        from imgrec.transforms.sharding import ShardConfig  # pylint: disable=import-outside-toplevel  # Beam's module
        return ShardConfig(fixed=dict(self.num_shards or {}), target_bytes=self.target_shard_mb * 1e6)

    def recorded(self) -> dict[str, typing.Any]:
        """dataset.json's ``options`` and ``record_options`` of this build, as ``build_metadata`` records them."""
        options, record_options = metadata.recorded_options(self.describe(), self.record_options.recorded())
        return {'options': options, 'record_options': record_options}

    def identity(self) -> dict[str, typing.Any]:
        """What makes two builds the same build (``imgrec.contract.metadata.identity``): a refresh that changed
        nothing publishes nothing, and a rerun of a published --version is the build that published it, only
        when this is the published dataset.json's."""
        return metadata.identity(self.recorded())

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


def _check_pairs(pairs: tuple[tuple[str, int], ...], option: str) -> None:
    """Refuses split names that are not plain, one named twice, and a value below 1 (``option``'s message)."""
    text = pairs_text(pairs)
    if not pairs or not all(isinstance(name, str) and layout.SPLIT_NAME.match(name) and isinstance(value, int)
                            and not isinstance(value, bool) for name, value in pairs):
        raise UserError(f'{option} must look like train=90,validation=10 (names of letters, digits, _), '
                        f'got {text!r}')
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UserError(f'{option} names a split twice: {text!r}')
    if any(value < 1 for _, value in pairs):
        raise UserError(f'{option} values must be at least 1, got {text!r}')


@dataclasses.dataclass(frozen=True)
class RunFacts:
    """What one run of the build found or decided: none of it is an option, none is in dataset.json's."""
    created: str  # when the options were parsed (UTC); dataset.json's 'created'
    build_id: str  # names this run's staging folder
    previous: 'Latest | None' = None  # what LATEST named when the build started (pre-flight)
    refresh: 'RefreshPlan | None' = None  # decided before the job runs
    decoders: int = 0  # threads each decoding DoFn hands the pixel work to (imgrec.transforms.decode): local in_memory runs
    destination: 'Output | None' = None  # the output folder and the job's storage of it, made once (launcher.prepare)

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
