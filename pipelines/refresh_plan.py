"""What a build takes from the version LATEST names, decided before the job runs (``imgrec.pipelines.refresh.plan``)."""
import dataclasses
import typing


@dataclasses.dataclass(frozen=True)
class RefreshPlan:
    previous: str | None = None          # the version LATEST named when the build started
    reuse_dir: str | None = None         # that version's folder, when its records are reused
    document: dict | None = None         # its dataset.json, when reused
    keep_labels: tuple[str, ...] | None = None  # its label order: new classes are appended to it
    full_reason: str | None = None       # why nothing is reused, when there was a version to reuse
    same_options: bool = False    # every option as in the previous version
    same_splits: bool = False     # the same --splits: its images' splits can be kept (near-duplicate groups)
    published_dir: str | None = None     # that version's folder, when its images keep their splits (no --resplit)
    published_document: dict | None = None  # its dataset.json then
    stopped: tuple[str, ...] = ()        # the staging folders of stopped runs of this build it takes records up from
    stopped_at: str | None = None        # when the last of them was last written (UTC)
    resume_from: tuple[str, ...] = ()    # their spill files

    @property
    def keeps_published(self) -> bool:
        return self.published_dir is not None

    @property
    def incremental(self) -> bool:
        return self.reuse_dir is not None

    def may_publish_nothing(self, config):
        """Whether a build of ``config`` publishes nothing if no image changed: it reuses the previous version
        with every option as it was, and --force was not given."""
        return self.incremental and self.same_options and not config.force

    def describe(self) -> dict:
        """The ``refresh`` object of dataset.json, less the counts the job adds."""
        mode = 'incremental' if self.incremental else 'full'
        described: dict[str, typing.Any] = {'previous': self.previous, 'mode': mode, 'full_reason': self.full_reason}
        if self.stopped:  # the job adds its counts ('images', 'refused')
            described['resumed'] = {'stopped_at': self.stopped_at,
                                    'from': [path.rstrip('/').rsplit('/', 1)[-1] for path in self.stopped]}
        return described
