"""Finds one published dataset version (``LATEST`` or a named one) and answers questions about it.

A reader must only ever see complete versions: ``LATEST`` is written last by the build, so following
it (or naming a version that has a ``dataset.json``) never lands on a half-written dataset.
"""
import dataclasses

from imgrec.contract import layout, metadata as metadata_lib, shard_check, version_ref
from imgrec.console.errors import DataError, UserError
from imgrec.storage import storage


@dataclasses.dataclass(frozen=True)
class DatasetVersion:
    root: str
    version: str
    metadata: dict

    @property
    def directory(self) -> str:
        return layout.join(self.root, self.version)

    @property
    def labels(self) -> list[str]:
        return list(self.metadata['labels'])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return metadata_lib.image_shape(self.metadata)

    @property
    def resize_mode(self) -> str:
        """How the build fitted images to the size (``crop``, ``pad`` or ``stretch``); serving repeats it."""
        return metadata_lib.resize_mode(self.metadata)

    def check_split(self, split):
        if split not in self.metadata['splits']:
            raise UserError(f"split {split!r} is not in dataset {self.directory} "
                            f"(it has {', '.join(sorted(self.metadata['splits']))})")

    def shards(self, split: str) -> list[tuple[str, int]]:
        """(path, record count) of each shard of ``split``, in index order."""
        self.check_split(split)
        return [(layout.join(self.directory, shard['file']), shard['records'])
                for shard in self.metadata['splits'][split]['shards']]

    def check_shards(self, splits):
        """Refuses a version whose shards of ``splits`` are missing or not the size ``dataset.json`` gives."""
        problems = shard_check.shard_problems(self.metadata, self.directory, _size, splits)
        if problems:
            more = f' (and {len(problems) - 1} more problem(s))' if len(problems) > 1 else ''
            raise DataError(f'dataset {self.directory} is damaged: {problems[0]}{more}')

    def num_examples(self, split: str) -> int:
        self.check_split(split)
        return metadata_lib.num_examples(self.metadata, split)


def _size(path: str) -> int | None:
    """Bytes in the file at ``path``, or None if there is no such file."""
    found = storage.storage_for(path).stat(path)
    return None if found is None else found.size


def open_version(root: str, version: str | None = None) -> DatasetVersion:
    """Returns the ``DatasetVersion`` named ``version`` in the output folder ``root``, else the one
    ``root`` names: ``root/LATEST``'s, or ``root`` itself when it is a version folder. The rules are the
    contract's (``imgrec.contract.version_ref``): every tool refuses the same mistakes with the same line."""
    files = storage.storage_for(root)
    is_that_version = (version is not None and root.rstrip('/').rpartition('/')[2] == version
                       and files.exists(layout.join(root, layout.DATASET_JSON)))  # resuming on OUT/VERSION
    try:
        ref = version_ref.resolve(root, files.read, files.exists, None if is_that_version else version)
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None
    return DatasetVersion(root=ref.output, version=ref.name, metadata=ref.document)
