"""The distributed training and evaluation steps.

Each host call runs ``steps`` steps in a ``tf.range`` loop (Keras' ``steps_per_execution``, Orbit's
inner loop), so a TPU is not starved by one Python round trip per step. Every step runs on all replicas
with ``strategy.run``; the loss is averaged over the global batch, so the optimizer's cross-replica sum
of gradients equals the gradient of the global batch. Steps return sums (loss, correct, count) that the
host adds up, which keeps evaluation exact: padded records (label ``PAD_LABEL``) count for nothing.
"""
import keras
import tensorflow as tf

from imgrec.training.dataset import PAD_LABEL


def _sums(labels, logits):
    """(sum of losses, correct predictions, records) over the real records of a batch, as float32."""
    valid = labels != PAD_LABEL
    safe_labels = tf.where(valid, labels, 0)
    losses = keras.losses.sparse_categorical_crossentropy(safe_labels, logits, from_logits=True)
    weights = tf.cast(valid, tf.float32)
    correct = tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int32) == safe_labels, tf.float32)
    return tf.stack([tf.reduce_sum(losses * weights), tf.reduce_sum(correct * weights), tf.reduce_sum(weights)])


class DistributedSteps:
    """``train(iterator, steps)`` and ``evaluate(iterator, steps)`` return summed [loss, correct, count]."""

    def __init__(self, strategy, model, optimizer, global_batch_size, jit_compile=False):
        self._strategy = strategy
        self._model = model
        self._optimizer = optimizer
        self._global_batch_size = global_batch_size
        self._gradients = tf.function(self._gradients_fn, jit_compile=jit_compile)
        self.train = tf.function(self._train_fn)
        self.evaluate = tf.function(self._evaluate_fn)

    def _gradients_fn(self, images, labels):
        with tf.GradientTape() as tape:
            logits = self._model(images, training=True)
            sums = _sums(labels, logits)
            loss = sums[0] / self._global_batch_size
            if isinstance(self._optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self._optimizer.scale_loss(loss)
        return sums, tape.gradient(loss, self._model.trainable_variables)

    def _train_step(self, images, labels):
        sums, gradients = self._gradients(images, labels)
        self._optimizer.apply_gradients(zip(gradients, self._model.trainable_variables))
        return sums

    def _evaluate_step(self, images, labels):
        return _sums(labels, self._model(images, training=False))

    def _run(self, step_fn, iterator, steps):
        totals = tf.zeros([3])
        for _ in tf.range(steps):
            images, labels = next(iterator)
            per_replica = self._strategy.run(step_fn, args=(images, labels))
            totals += self._strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        return totals

    def _train_fn(self, iterator, steps):
        return self._run(self._train_step, iterator, steps)

    def _evaluate_fn(self, iterator, steps):
        return self._run(self._evaluate_step, iterator, steps)
