"""What ``load(..., with_info=True)`` returns beside the dataset, as ``tfds.load`` returns its DatasetInfo:
the facts of the version read, from its ``dataset.json``, without reading a shard."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    name: str            # the dataset's name (build-dataset --name)
    version: str         # the version's folder name
    directory: str       # the version folder, local or gs://
    class_names: list    # label i is class_names[i]
    image_shape: tuple   # (height, width, channels) of the stored images
    splits: dict         # {split: number of examples}
    document: dict = dataclasses.field(repr=False)  # the whole dataset.json

    @property
    def num_classes(self):
        return len(self.class_names)

    @classmethod
    def of(cls, source):
        """The info of ``source``, a ``dataset_version.DatasetVersion``."""
        return cls(name=source.metadata['name'], version=source.version, directory=source.directory,
                   class_names=source.labels, image_shape=tuple(source.image_shape),
                   splits={split: source.num_examples(split) for split in source.metadata['splits']},
                   document=source.metadata)
