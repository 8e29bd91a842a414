"""The build's configuration: the user's options (``BuildConfig``) and the facts one run finds (``RunFacts``).

Parsed from the command line by ``imgrec.pipelines.options``; read by every step after it. Imports no Beam
and nothing of the steps that read it, so they can all take it.
"""
import dataclasses
import datetime
import typing
import uuid

from imgrec.contract import layout
from imgrec.imaging.record_options import RecordOptions

if typing.TYPE_CHECKING:  # for annotations only: the others load Beam or Google's clients
    from imgrec.pipelines.refresh_plan import RefreshPlan
    from imgrec.storage import retries
    from imgrec.storage.publication import Latest
    from imgrec.transforms.sharding import ShardConfig


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
