"""The model, optimizer and global step in ``<model_dir>/checkpoints``, local or ``gs://``."""
import tensorflow as tf

from imgrec.contract import layout
from imgrec.training.run_state import CHECKPOINTS

MAX_CHECKPOINTS = 3


class Checkpoints:
    """Saves and restores a run; ``step`` is the global step of the newest checkpoint."""

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
