"""Trains Keras models from the TFRecord shards the build job publishes, on TPU, GPU or CPU.

Reads only the on-disk contract (``contract``) and never imports Apache Beam, so a training host needs
TensorFlow alone. Modules: ``dataset_version`` finds a published version, ``records`` parses its
Examples, ``images`` holds the pixel operations shared by training and serving, ``dataset`` is the
input pipeline, ``strategy`` picks the accelerator, ``model`` the network, ``loop`` the distributed
steps, ``run_state`` the checkpoints, ``export`` the SavedModel and ``train`` the command line.
"""
