"""image-tfrecords: a folder of labelled images (one folder per class) into TFRecord shards, and back.

The public API is three calls (docs/python-api.md):

- ``imgrec.build(input=..., output=..., **options)`` builds a dataset version, as ``build-dataset`` does;
- ``imgrec.load(data, split)`` reads a split as a ``tf.data.Dataset`` of (image, label) pairs;
- ``imgrec.grain_source(data, split)`` reads its ArrayRecord shards with Grain, without TensorFlow.

``import imgrec`` imports neither Apache Beam nor TensorFlow: each call imports what it needs when first
called, so a training host needs no Beam, and reading with Grain needs neither. The longer paths
(``imgrec.pipelines.python_api.build``, ``imgrec.training.load``, ``imgrec.training.grain_source``) keep
working: these three call them.

This is also the one import root: every package is a folder below this one (``imgrec.storage``,
``imgrec.contract``, ...); the design card's top-level ``pipelines/``, ``transforms/`` and ``training/`` are
reached through the committed directory links beside these folders, so import paths are folder paths for
Python, type checkers, editors and import graphs alike (docs/architecture.md, "One import root").
"""
from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    import grain
    import tensorflow as tf

    from imgrec.pipelines.build_result import BuildResult
    from imgrec.training.dataset_info import DatasetInfo

__all__ = ['build', 'load', 'grain_source']


def build(input: str | None = None, output: str | None = None, *,  # pylint: disable=redefined-builtin
          beam_options: typing.Sequence[str] | None = None, **options: typing.Any) -> BuildResult | None:
    """Builds (or refreshes) a dataset version from a folder of class folders; returns its dataset.json.

    The options are ``build-dataset``'s, by the same names and defaults; Beam's own go in ``beam_options``.
    The result is a dict of the published dataset.json that prints as the command's summary; None for a
    Dataflow job not waited for. A mistake raises ``imgrec.console.errors.UserError``, a build that could
    not publish ``BuildFailed``, each with a one-line message.

    Example::

        import imgrec
        result = imgrec.build(input='photos', output='datasets/photos', image_size=224,
                              splits={'train': 80, 'validation': 20})
        print(result)  # counts, each split's share, near-duplicates, quarantine
    """
    from imgrec.pipelines import python_api  # pylint: disable=import-outside-toplevel
    return python_api.build(input, output, beam_options=beam_options, **options)


def load(data: str, split: str = 'train', *, version: str | None = None, batch_size: int | None = None,
         image_size: int | tuple[int, int] | None = None, crop_to_aspect_ratio: bool = False,
         pad_to_aspect_ratio: bool = False, label_mode: str = 'int', shuffle: bool = True, seed: int | None = None,
         as_supervised: bool = True, with_info: bool = False,
         verbose: bool = True) -> tf.data.Dataset | tuple[tf.data.Dataset, DatasetInfo]:
    """A split of a built dataset as a ``tf.data.Dataset`` of (uint8 image [H, W, 3], int32 label).

    ``data`` is an output folder (the version its LATEST names) or a version folder, local or gs://. The
    arguments are Keras's ``image_dataset_from_directory``'s where they mean the same; ``with_info=True``
    returns (dataset, ``DatasetInfo``) as ``tfds.load`` does. It is ``imgrec.training.dataset.load``,
    imported at the first call (which also keeps TensorFlow's log lines off if TensorFlow is not imported
    yet); its docstring and docs/python-api.md say the rest.

    Example::

        import imgrec
        train = imgrec.load('datasets/photos', 'train', batch_size=32, seed=0)
        model.fit(train, epochs=3)  # train.class_names[label] names each label
    """
    from imgrec.training import dataset  # pylint: disable=import-outside-toplevel
    return dataset.load(data, split, version=version, batch_size=batch_size, image_size=image_size,
                        crop_to_aspect_ratio=crop_to_aspect_ratio, pad_to_aspect_ratio=pad_to_aspect_ratio,
                        label_mode=label_mode, shuffle=shuffle, seed=seed, as_supervised=as_supervised,
                        with_info=with_info, verbose=verbose)


def grain_source(data: str, split: str = 'train', *, version: str | None = None, batch_size: int = 32,
                 seed: int = 0, num_epochs: int = 1, drop_remainder: bool = False) -> grain.MapDataset:
    """A split's ArrayRecord shards as a Grain ``MapDataset`` of numpy (images, labels) batches, without TensorFlow.

    Every record once an epoch, in a global shuffle by ``seed``; the version must have been built with
    ``formats=['tfrecord', 'array_record']`` on a local disk. It is ``imgrec.training.grain_input.grain_source``,
    imported at the first call (docs/array-record.md).

    Example::

        import imgrec
        for images, labels in imgrec.grain_source('datasets/photos', 'train', batch_size=64, num_epochs=2):
            ...  # images: uint8 [64, H, W, 3], labels: int64 [64]
    """
    from imgrec.training import grain_input  # pylint: disable=import-outside-toplevel
    return grain_input.grain_source(data, split, version=version, batch_size=batch_size, seed=seed,
                                    num_epochs=num_epochs, drop_remainder=drop_remainder)
