"""Trains Keras models from the TFRecord shards the build job publishes, on TPU, GPU or CPU.

Reads only the on-disk contract (``contract``) and never imports Apache Beam, so a training host needs
TensorFlow alone. Modules: ``train`` is the command line, which checks arguments and data before
TensorFlow is imported (with ``storage``, ``dataset_version`` and ``run_state``) and keeps TensorFlow's
log lines off the terminal (``native_logs``); ``trainer`` runs the training. ``dataset_version`` finds a
published version, ``records`` parses its Examples, ``images`` holds the pixel operations shared by
training and serving, ``dataset`` is the input pipeline, ``record_check`` names a damaged shard,
``strategy`` picks the accelerator, ``model`` the network, ``loop`` the distributed steps,
``checkpoints`` and ``run_state`` what a model_dir keeps, ``progress`` the lines between epochs and
``export`` the SavedModel.
"""
