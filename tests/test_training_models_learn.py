"""Every ``--model`` learns: trained briefly by the trainer's own epoch loop, each beats chance on validation.

The data are the sample shapes drawn white on black at 32x32 (the smallest input Keras' backbones take),
256 training and 64 validation images of 4 classes, with a fixed seed. The loop (``trainer._fit``) runs
as ``train-model`` runs it, but checkpoints nowhere: ResNet50's would be 280 MB an epoch.

This is what caught MobileNetV2 at chance on validation while its training accuracy climbed: evaluated
with moving batch normalisation statistics that lagged its weights, it answered one class for every
image (25%). ``DistributedSteps.recompute_norm_statistics`` is why it learns now.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from imgrec.training import dataset_version, loop, model as model_lib, trainer
from imgrec.training.config import TrainConfig
from imgrec.training.train import BUILT_IN_MODELS
from tests import training_fixtures as fixtures

CLASSES = 4
EPOCHS, BATCH = 6, 32
# Chance is 25%; half right is 16 of the 64 validation images more than chance, a margin no model
# reaches by answering one or two classes.
PASS_ACCURACY = 0.5


class _NoCheckpoints:
    """Stands in for ``Checkpoints``: a run from step 0 that saves nothing."""

    def __init__(self):
        self.step = tf.Variable(0, dtype=tf.int64)

    def save(self, step):
        del step


@pytest.fixture(scope='module')
def shapes(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('shapes'))
    fixtures.write_dataset(root, {'train': (256, 2), 'validation': (64, 1)}, image_size=32,
                           content='plain_shapes', seed=0)
    return root


def _validation_accuracy(name, data, model_dir, monkeypatch):
    """The validation accuracy after each epoch of a ``--model name`` run of ``EPOCHS`` epochs."""
    config = TrainConfig(data=data, model_dir=model_dir, model=name, epochs=EPOCHS, batch_size=BATCH, seed=0,
                         quiet=True)
    source = dataset_version.open_version(data)
    accelerator = trainer._accelerator(config)
    inputs = trainer._inputs(config, source, accelerator)
    steps_per_epoch = inputs.train.steps_per_epoch(accelerator.num_input_pipelines)
    model, optimizer = trainer._model_and_optimizer(config, source, accelerator, steps_per_epoch)
    epochs = []
    monkeypatch.setattr(trainer, '_report', lambda epoch, total, writers: epochs.append(epoch))
    trainer._fit(config, accelerator, inputs, model, optimizer, _NoCheckpoints())
    return [epoch.eval_sums[1] / epoch.eval_sums[2] for epoch in epochs]


def test_every_documented_model_is_tested():
    assert sorted(model_lib.MODELS) == sorted(BUILT_IN_MODELS.replace(' or ', ', ').split(', '))


@pytest.mark.parametrize('name', sorted(model_lib.MODELS))
def test_every_model_beats_chance_on_validation(name, shapes, tmp_path, monkeypatch):
    accuracies = _validation_accuracy(name, shapes, str(tmp_path), monkeypatch)
    assert len(accuracies) == EPOCHS
    assert accuracies[-1] >= PASS_ACCURACY, f'{name}: validation accuracy by epoch {accuracies}, chance 0.25'


def test_the_statistics_pass_sets_every_batch_norm_to_the_mean_of_its_batch_statistics():
    """Two batches through ``recompute_norm_statistics``: the first and the last layer's moving mean and
    variance are the mean over the batches of what each layer computes from a batch when training."""
    keras.utils.set_random_seed(0)
    model = model_lib.build_model('small_cnn', (16, 16, 3), CLASSES)
    steps = loop.DistributedSteps(tf.distribute.get_strategy(), model, keras.optimizers.Adam(), 4)
    batches = np.random.default_rng(0).integers(0, 256, (2, 4, 16, 16, 3), dtype=np.uint8)
    data = tf.data.Dataset.from_tensor_slices(batches).map(lambda images: (images, tf.zeros([4], tf.int32)))
    steps.recompute_norm_statistics(iter(data), tf.constant(2))
    norms = loop.batch_normalizations(model)
    for layer in (norms[0], norms[-1]):
        inputs = keras.Model(model.input, layer.input)
        values = [inputs(batch, training=True).numpy() for batch in batches]
        np.testing.assert_allclose(layer.moving_mean.numpy(), np.mean([v.mean((0, 1, 2)) for v in values], 0),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(layer.moving_variance.numpy(), np.mean([v.var((0, 1, 2)) for v in values], 0),
                                   rtol=1e-4, atol=1e-5)
