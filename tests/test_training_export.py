"""The exported SavedModel, loaded the ways a serving system loads it.

The model is a small CNN with random weights: what is checked is that every loader serves the same
function as the Keras model, not what it learnt. ``saved_model_cli run`` uses TensorFlow's session
loader, as TF Serving, Vertex AI prediction and KServe do.
"""
import io
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from imgrec.training import export, model as model_lib

LABELS = ['circle', 'square', 'triangle']
SHAPE = (32, 32, 3)


def _encoded(pixels, format='JPEG'):
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=format)
    return buffer.getvalue()


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """(export path, Keras model, JPEGs of the model's own size, and their decoded pixels)."""
    keras.utils.set_random_seed(7)
    model = model_lib.build_model('small_cnn', SHAPE, len(LABELS))
    path = export.export_saved_model(model, str(tmp_path_factory.mktemp('export') / '1'), labels=LABELS,
                                     image_shape=SHAPE, resize_mode='crop')
    rng = np.random.default_rng(0)
    jpegs = [_encoded(rng.integers(0, 256, SHAPE, dtype=np.uint8)) for _ in range(4)]
    return path, model, jpegs, np.stack([tf.io.decode_jpeg(jpeg).numpy() for jpeg in jpegs])


def _keras_probabilities(model, pixels):
    return tf.nn.softmax(model(pixels, training=False)).numpy()


def test_the_session_loader_serves_the_keras_models_probabilities(exported, tmp_path):
    path, model, jpegs, pixels = exported
    np.save(tmp_path / 'images.npy', np.array(jpegs, dtype=object))
    cli = os.path.join(os.path.dirname(sys.executable), 'saved_model_cli')
    result = subprocess.run([cli, 'run', '--dir', path, '--tag_set', 'serve', '--signature_def', export.SIGNATURE_NAME,
                             '--inputs', f"{export.INPUT_NAME}={tmp_path / 'images.npy'}",
                             '--outdir', str(tmp_path / 'out')], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = np.load(tmp_path / 'out' / 'probabilities.npy')
    np.testing.assert_allclose(served, _keras_probabilities(model, pixels), atol=1e-5)
    assert np.load(tmp_path / 'out' / 'valid.npy').all()
    label_ids = np.load(tmp_path / 'out' / 'label_id.npy')
    assert list(label_ids) == list(served.argmax(axis=1))
    labels = np.load(tmp_path / 'out' / 'label.npy', allow_pickle=True)
    assert [name.decode() for name in labels] == [LABELS[i] for i in label_ids]


def test_a_fresh_process_that_never_imports_the_project_loads_and_serves_it(exported, tmp_path):
    path, model, jpegs, pixels = exported
    code = '\n'.join([
        'import json, sys',
        'import tensorflow as tf',
        f'serve = tf.saved_model.load({path!r}).signatures[{export.SIGNATURE_NAME!r}]',
        f'outputs = serve({export.INPUT_NAME}=tf.constant({jpegs!r}))',
        "project = sorted(m for m in sys.modules if m.split('.')[0] in ('imgrec', 'training', 'contract', 'pipelines', 'tests'))",
        "print(json.dumps({'project_modules': project, 'probabilities': outputs['probabilities'].numpy().tolist(),",
        "                  'label_names': [[n.decode() for n in row] for row in outputs['label_names'].numpy()]}))",
    ])
    environment = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    result = subprocess.run([sys.executable, '-I', '-c', code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report['project_modules'] == []
    np.testing.assert_allclose(report['probabilities'], _keras_probabilities(model, pixels), atol=1e-5)
    assert report['label_names'] == [LABELS] * len(jpegs)


def test_undecodable_inputs_get_a_defined_output_and_do_not_fail_the_batch(exported):
    path, model, jpegs, pixels = exported
    serve = tf.saved_model.load(path).signatures[export.SIGNATURE_NAME]
    wide_png = _encoded(np.full((20, 90, 3), 200, np.uint8), 'PNG')  # another format and size: decoded and fitted
    batch = [jpegs[0], b'not an image', jpegs[1][:len(jpegs[1]) // 2], b'', wide_png, jpegs[2]]
    outputs = {key: value.numpy() for key, value in serve(**{export.INPUT_NAME: tf.constant(batch)}).items()}
    assert list(outputs['valid']) == [True, False, False, False, True, True]
    assert list(outputs['label_id'][1:4]) == [-1, -1, -1]
    assert list(outputs['label'][1:4]) == [b'', b'', b'']
    assert not outputs['probabilities'][1:4].any()
    good = _keras_probabilities(model, pixels[:3])
    np.testing.assert_allclose(outputs['probabilities'][[0, 5]], good[[0, 2]], atol=1e-5)
    np.testing.assert_allclose(outputs['probabilities'][4].sum(), 1.0, rtol=1e-5)
    assert outputs['label_names'].shape == (len(batch), len(LABELS))


def test_a_batch_with_nothing_decodable_still_answers(exported):
    path, *_ = exported
    serve = tf.saved_model.load(path).signatures[export.SIGNATURE_NAME]
    outputs = serve(**{export.INPUT_NAME: tf.constant([b'junk', b'\xff\xd8\xff'])})
    assert list(outputs['valid'].numpy()) == [False, False]
    assert list(outputs['label_id'].numpy()) == [-1, -1]
    assert outputs['probabilities'].shape == (2, len(LABELS))
