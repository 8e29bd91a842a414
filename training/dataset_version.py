"""Finds one published dataset version (``LATEST`` or a named one) and answers questions about it.

A reader must only ever see complete versions: ``LATEST`` is written last by the build, so following
it (or naming a version that has a ``dataset.json``) never lands on a half-written dataset.
"""
import dataclasses

from contract import layout, metadata as metadata_lib, shard_check
from training import tf_files
from training.errors import DataError, UserError


@dataclasses.dataclass(frozen=True)
class DatasetVersion:
    root: str
    version: str
    metadata: dict

    @property
    def directory(self):
        return layout.join(self.root, self.version)

    @property
    def labels(self):
        return list(self.metadata['labels'])

    @property
    def image_shape(self):
        return metadata_lib.image_shape(self.metadata)

    @property
    def resize_mode(self):
        """How the build fitted images to the size (``crop``, ``pad`` or ``stretch``); serving repeats it."""
        return self.metadata.get('options', {}).get('resize', 'crop')

    def check_split(self, split):
        if split not in self.metadata['splits']:
            raise UserError(f"split {split!r} is not in dataset {self.directory} "
                            f"(it has {', '.join(sorted(self.metadata['splits']))})")

    def shards(self, split):
        """(path, record count) of each shard of ``split``, in index order."""
        self.check_split(split)
        return [(layout.join(self.directory, shard['file']), shard['records'])
                for shard in self.metadata['splits'][split]['shards']]

    def check_shards(self, splits):
        """Refuses a version whose shards of ``splits`` are missing or not the size ``dataset.json`` gives."""
        problems = shard_check.shard_problems(self.metadata, self.directory, tf_files.size, splits)
        if problems:
            more = f' (and {len(problems) - 1} more problem(s))' if len(problems) > 1 else ''
            raise DataError(f'dataset {self.directory} is damaged: {problems[0]}{more}')

    def num_examples(self, split):
        self.check_split(split)
        return metadata_lib.num_examples(self.metadata, split)


def open_version(root, version=None):
    """Returns the ``DatasetVersion`` named ``version``, or the one ``<root>/LATEST`` names."""
    if version is None:
        latest = layout.join(root, layout.LATEST)
        if not tf_files.exists(latest):
            raise UserError(f'no published dataset at {root}: {latest} does not exist '
                            '(build one with build-dataset, or check --data)')
        version = tf_files.read_text(latest).strip()
    if layout.is_staging_name(version):
        raise UserError(f'{version!r} is the staging folder of a build that did not publish it, not a version')
    metadata_path = layout.join(root, version, layout.DATASET_JSON)
    if not tf_files.exists(metadata_path):
        raise UserError(f'dataset version {version!r} not found: {metadata_path} does not exist')
    try:
        metadata = metadata_lib.loads(tf_files.read_text(metadata_path))
    except ValueError as error:
        raise UserError(f'{metadata_path}: {error}') from None
    return DatasetVersion(root=root.rstrip('/'), version=version, metadata=metadata)
