"""imgrec.training.model: every --model takes uint8 images and returns float32 logits, also under mixed precision."""
import keras
import numpy as np
import pytest

from imgrec.training import model as model_lib


@pytest.fixture
def bfloat16_policy():
    keras.mixed_precision.set_global_policy('mixed_bfloat16')
    yield
    keras.mixed_precision.set_global_policy('float32')


@pytest.mark.parametrize('name', sorted(model_lib.MODELS))
def test_models_take_uint8_images_and_return_float32_logits(name):
    model = model_lib.build_model(name, (32, 32, 3), 5)
    assert model.input.dtype == 'uint8'
    logits = model(np.zeros((2, 32, 32, 3), np.uint8), training=False)
    assert logits.shape == (2, 5) and logits.dtype == 'float32'


def test_mixed_bfloat16_computes_in_bfloat16_from_the_first_layer(bfloat16_policy):
    model = model_lib.build_model('small_cnn', (32, 32, 3), 4)
    scale = model.get_layer('scale_to_unit_range')
    assert scale.compute_dtype == 'bfloat16'
    assert scale(np.full((1, 2, 2, 3), 255, np.uint8)).dtype == 'bfloat16'
    assert model(np.zeros((1, 32, 32, 3), np.uint8)).dtype == 'float32'


def test_pixels_are_scaled_to_the_unit_range():
    scale = model_lib.build_model('small_cnn', (32, 32, 3), 4).get_layer('scale_to_unit_range')
    assert np.allclose(scale(np.array([[[[0, 255, 128]]]], np.uint8)), [[[[-1.0, 1.0, 128 / 127.5 - 1]]]], atol=1e-6)
