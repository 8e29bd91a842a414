"""Trains Keras models from the TFRecord shards the build job publishes, on TPU, GPU or CPU.

Reads only the on-disk contract (``contract``) and never imports Apache Beam, so a training host needs
TensorFlow alone. Modules: ``train`` is the command line, which checks arguments and data before
TensorFlow is imported (with ``dataset_version`` and ``run_state``, whose files go through
``imgrec.storage.storage``) and keeps TensorFlow's
log lines off the terminal (``imgrec.console``), and builds the run's ``config.TrainConfig`` once;
``trainer`` runs the training from it. ``dataset_version`` finds a
published version, ``example_parsing`` parses its Examples, ``images`` holds the pixel operations shared by
training and serving, ``dataset`` is the input pipeline, ``record_check`` names a damaged shard,
``strategy`` picks the accelerator, ``model`` the network, ``loop`` the distributed steps,
``checkpoints`` and ``run_state`` what a model_dir keeps, ``progress`` the lines between epochs and
``export`` the SavedModel.

For a notebook: ``training.load`` (``dataset.load``, a split as a ``tf.data.Dataset``, with a
``dataset_info.DatasetInfo`` when asked) and
``training.grain_source`` (``grain_input.grain_source``, its ArrayRecord shards through Grain, without
TensorFlow), imported when first called. Importing the package keeps TensorFlow's log lines off (``quiet``).
"""
from imgrec.training import quiet as _quiet

_quiet.quiet()


def load(data, split='train', **options):
    """``imgrec.training.dataset.load`` (its docstring says all), imported at the first call: importing the package
    imports no TensorFlow."""
    from imgrec.training import dataset  # pylint: disable=import-outside-toplevel
    return dataset.load(data, split, **options)


def grain_source(data, split='train', **options):
    """``imgrec.training.grain_input.grain_source`` (its docstring says all), imported at the first call."""
    from imgrec.training import grain_input  # pylint: disable=import-outside-toplevel
    return grain_input.grain_source(data, split, **options)
