"""The distributed training and evaluation steps.

Each host call runs ``steps`` steps in a ``tf.range`` loop (Keras' ``steps_per_execution``, Orbit's
inner loop), so a TPU is not starved by one Python round trip per step. Every step runs on all replicas
with ``strategy.run``; the loss is averaged over the global batch, so the optimizer's cross-replica sum
of gradients equals the gradient of the global batch. Steps return sums (loss, correct, count) that the
host adds up, which keeps evaluation exact: padded records (label ``PAD_LABEL``) count for nothing.

``recompute_norm_statistics`` sets every batch normalisation layer's moving mean and variance to the
average of its batch statistics over training batches, with the weights as they are (pycls' "precise
BN"). Evaluation, checkpoints and the export use the moving statistics, and an exponential average lags
a network that is still changing fast: Keras' MobileNetV2 (momentum 0.999) keeps 91% of its starting
mean 0 and variance 1 after the demo's 96 steps, and stayed at chance on validation (26.6%) while its
training accuracy climbed; even momentum 0.9 left it at chance after 48 steps at 32x32.
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
        self._norms = batch_normalizations(model)
        # The input of every batch normalisation layer, from the model's input (they are in its graph).
        self._norm_inputs = keras.Model(model.input, [layer.input for layer in self._norms]) if self._norms else None
        self.recompute_norm_statistics = tf.function(self._recompute_fn)

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

    def _norm_moments_step(self, images, labels):
        """Each batch normalisation layer's batch mean and variance, as it computes them when training."""
        del labels
        inputs = self._norm_inputs(images, training=True)
        moments = []
        for layer, values in zip(self._norms, inputs if len(self._norms) > 1 else [inputs]):
            values = tf.cast(values, tf.float32)
            axis = layer.axis % len(values.shape)
            mean, variance = tf.nn.moments(values, [dim for dim in range(len(values.shape)) if dim != axis])
            moments += [mean, variance]
        return moments

    def _recompute_fn(self, iterator, steps):
        """Sets the moving statistics to the mean over ``steps`` training batches of their batch statistics."""
        if not self._norms:
            return
        variables = [variable for layer in self._norms for variable in (layer.moving_mean, layer.moving_variance)]
        totals = [tf.zeros(variable.shape, tf.float32) for variable in variables]
        for _ in tf.range(steps):
            images, labels = next(iterator)
            per_replica = self._strategy.run(self._norm_moments_step, args=(images, labels))
            totals = [total + self._strategy.reduce(tf.distribute.ReduceOp.MEAN, moment, axis=None)
                      for total, moment in zip(totals, per_replica)]
        for variable, total in zip(variables, totals):
            variable.assign(tf.cast(total / tf.cast(steps, tf.float32), variable.dtype))

    def _train_fn(self, iterator, steps):
        return self._run(self._train_step, iterator, steps)

    def _evaluate_fn(self, iterator, steps):
        return self._run(self._evaluate_step, iterator, steps)


def batch_normalizations(model: keras.Model) -> list[keras.layers.BatchNormalization]:
    """The batch normalisation layers of ``model``'s graph (the backbones are built into it, not nested)."""
    return [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
