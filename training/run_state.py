"""What a ``--model_dir`` keeps between runs: checkpoints, and the settings a resume must not change.

A resumed run recomputes the data order from (seed, epoch, step). That is only right with the dataset
version, global batch size, seed and input pipeline count the checkpoints were made with, so the first
run writes them to ``run.json`` and later runs must match (the version is taken from it by default).
"""
import json

import tensorflow as tf

from contract import layout
from training.errors import UserError

RUN_JSON = 'run.json'
CHECKPOINTS = 'checkpoints'
MAX_CHECKPOINTS = 3


def read_settings(model_dir):
    """The settings pinned in ``model_dir``, or {} for a new run."""
    path = layout.join(model_dir, RUN_JSON)
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def pin_settings(model_dir, settings):
    """Writes ``settings`` for a new ``model_dir``; for an existing one, refuses any that changed."""
    pinned = read_settings(model_dir)
    if not pinned:
        tf.io.gfile.makedirs(model_dir)
        with tf.io.gfile.GFile(layout.join(model_dir, RUN_JSON), 'w') as f:
            f.write(json.dumps(settings, indent=2, sort_keys=True) + '\n')
        return
    changed = [f'{key} {pinned.get(key)!r} -> {value!r}' for key, value in settings.items() if pinned.get(key) != value]
    if changed:
        raise UserError(f"{model_dir} holds a run with other settings ({'; '.join(changed)}); resuming it needs the "
                        'same ones, or pass a new --model_dir')


class Checkpoints:
    """The model, optimizer and global step in ``<model_dir>/checkpoints``, local or ``gs://``."""

    def __init__(self, model_dir, model, optimizer):
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name='global_step')
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=self.step)
        self._manager = tf.train.CheckpointManager(checkpoint, layout.join(model_dir, CHECKPOINTS), MAX_CHECKPOINTS)

    def restore(self):
        """Restores the newest checkpoint, if any; returns the global step it was taken at (0 if none)."""
        if self._manager.latest_checkpoint:
            self._manager.checkpoint.restore(self._manager.latest_checkpoint).assert_existing_objects_matched()
        return int(self.step.numpy())

    def save(self, step):
        self.step.assign(step)
        return self._manager.save(checkpoint_number=step)
