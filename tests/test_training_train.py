"""``python -m imgrec.training.train`` end to end on the CPU: epochs, checkpoints, logs, export, serving, errors.

The main run trains on a dataset built by the real Beam pipeline (conftest's ``built_dataset``).
"""
import os
import pkgutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from imgrec import training
from imgrec.contract import features as F, layout
from tests import training_fixtures as fixtures
from imgrec.training import dataset, dataset_version, example_parsing, export, model as model_lib, run_state, train
from imgrec.training import trainer

EPOCHS, BATCH = 2, 8


@pytest.fixture(scope='module')
def trained(built_dataset, tmp_path_factory):
    """(model_dir, stdout) of a short run with step checkpoints on the pipeline-built dataset."""
    model_dir = str(tmp_path_factory.mktemp('run') / 'model')
    result = subprocess.run(
        [sys.executable, '-m', 'imgrec.training.train', '--data', built_dataset, '--epochs', str(EPOCHS),
         '--batch_size', str(BATCH), '--checkpoint_steps', '2', '--model_dir', model_dir],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == '', 'TensorFlow log lines reached the user'
    return model_dir, result.stdout


def _steps_per_epoch(data):
    source = dataset_version.open_version(data)
    return dataset.InputReader(source, dataset.InputConfig('train', BATCH, True)).steps_per_epoch()


def test_short_run_prints_one_line_per_epoch_with_exact_validation_counts(trained, built_dataset):
    _, stdout = trained
    source = dataset_version.open_version(built_dataset)
    lines = [line for line in stdout.splitlines() if line.startswith('epoch ')]
    assert [line.split(':')[0] for line in lines] == ['epoch 1/2', 'epoch 2/2']
    for line in lines:
        assert 'train loss' in line and 'images/s' in line
        assert f"/{source.num_examples('validation')} = " in line
    assert 'strategy: MirroredStrategy on 1 CPU device(s), 1 replica(s)' in stdout


def test_run_leaves_checkpoints_logs_settings_and_an_export(trained, built_dataset):
    model_dir, _ = trained
    total = EPOCHS * _steps_per_epoch(built_dataset)
    latest = tf.train.latest_checkpoint(layout.join(model_dir, run_state.CHECKPOINTS))
    assert latest.endswith(f'ckpt-{total}')
    assert tf.train.load_variable(latest, 'step/.ATTRIBUTES/VARIABLE_VALUE') == total
    assert tf.train.load_variable(latest, 'optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE') == total
    for split in ('train', 'validation'):
        assert any(name.startswith('events.out.tfevents') for name in os.listdir(f'{model_dir}/logs/{split}'))
    assert run_state.read_settings(model_dir)['global_batch_size'] == BATCH
    assert os.path.exists(f'{model_dir}/export/{total}/saved_model.pb')


def test_saved_model_serves_jpeg_bytes_like_the_training_pipeline(trained, built_dataset, sample_images):
    model_dir, _ = trained
    source = dataset_version.open_version(built_dataset)
    total = EPOCHS * _steps_per_epoch(built_dataset)
    serve = tf.saved_model.load(f'{model_dir}/export/{total}').signatures[export.SIGNATURE_NAME]

    # Original photos of any size and aspect ratio.
    paths = sorted(os.path.join(root, name) for root, _, names in os.walk(sample_images)
                   for name in names if name.endswith('.jpg'))[:5]
    outputs = serve(image_bytes=tf.constant([open(path, 'rb').read() for path in paths]))
    assert outputs['probabilities'].shape == (5, len(source.labels))
    np.testing.assert_allclose(outputs['probabilities'].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert [[name.decode() for name in row] for row in outputs['label_names'].numpy()] == [source.labels] * 5
    assert {name.decode() for name in outputs['label'].numpy()} <= set(source.labels)

    # The dataset's own JPEGs: serving must agree with the model on the training pipeline's input.
    shard_path = source.shards('validation')[0][0]
    encoded, expected_images = [], []
    for serialized in tf.data.TFRecordDataset(shard_path).take(4):
        features = example_parsing.parse_example(serialized)
        encoded.append(features[F.IMAGE_ENCODED])
        image, _ = example_parsing.decode_image_label(features, source.image_shape)
        expected_images.append(image)
    model = model_lib.build_model('small_cnn', source.image_shape, len(source.labels))
    tf.train.Checkpoint(model=model).restore(
        tf.train.latest_checkpoint(f'{model_dir}/{run_state.CHECKPOINTS}')).expect_partial()
    expected = tf.nn.softmax(model(tf.stack(expected_images), training=False))
    served = serve(image_bytes=tf.stack(encoded))['probabilities']
    np.testing.assert_allclose(served.numpy(), expected.numpy(), atol=1e-4)


def test_rerun_of_a_finished_run_trains_no_more_steps(trained, built_dataset, capsys):
    model_dir, _ = trained
    assert train.main(['--data', built_dataset, '--epochs', str(EPOCHS), '--batch_size', str(BATCH),
                       '--model_dir', model_dir]) == 0
    out = capsys.readouterr().out
    steps = _steps_per_epoch(built_dataset)
    assert f'already holds {EPOCHS * steps} steps ({EPOCHS} epoch(s) of {steps} steps), and --epochs {EPOCHS} ' \
           f'needs {EPOCHS * steps}: nothing to train' in out
    assert not [line for line in out.splitlines() if line.startswith('epoch ')]


def test_a_finished_run_resumed_with_fewer_epochs_says_how_many_it_holds(trained, built_dataset, capsys):
    model_dir, _ = trained
    assert train.main(['--data', built_dataset, '--epochs', '1', '--batch_size', str(BATCH),
                       '--model_dir', model_dir]) == 0
    out = capsys.readouterr().out
    steps = _steps_per_epoch(built_dataset)
    assert f'already holds {EPOCHS * steps} steps ({EPOCHS} epoch(s) of {steps} steps), and --epochs 1 needs ' \
           f'{steps}: nothing to train' in out
    assert not [line for line in out.splitlines() if line.startswith('epoch ')]


def test_steps_are_told_in_the_epochs_they_make():
    assert trainer.held_epochs(128, 16) == '8 epoch(s)'
    assert trainer.held_epochs(120, 16) == '7 epoch(s) and 8 step(s)'
    assert trainer.held_epochs(5, 16) == '0 epoch(s) and 5 step(s)'


def test_resume_refuses_changed_settings(trained, built_dataset, capsys):
    model_dir, _ = trained
    assert train.main(['--data', built_dataset, '--epochs', '3', '--batch_size', '4', '--model_dir', model_dir]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'global_batch_size 8 -> 4' in err


def test_profile_input_reports_throughput_and_first_batch(built_dataset, tmp_path, capsys):
    assert train.main(['--data', built_dataset, '--batch_size', '4', '--profile_input',
                       '--model_dir', str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'input pipeline: first batch after' in out and 'images/s' in out
    assert not os.path.exists(tmp_path / run_state.RUN_JSON), 'profiling must not start a run'


def test_reads_data_and_writes_model_dir_through_tf_io_gfile(tmp_path, capsys):
    """TensorFlow's in-memory ram:// filesystem stands in for gs://: no step may use the local disk API."""
    fixtures.write_dataset(str(tmp_path), {'train': (16, 2), 'validation': (8, 2)})
    tf.io.gfile.makedirs('ram://bucket/data/v1')
    for name in [layout.LATEST] + [f'v1/{name}' for name in os.listdir(tmp_path / 'v1')]:
        tf.io.gfile.copy(str(tmp_path / name), f'ram://bucket/data/{name}')
    assert train.main(['--data', 'ram://bucket/data', '--epochs', '1', '--batch_size', '8',
                       '--model_dir', 'ram://bucket/model']) == 0
    assert 'epoch 1/1:' in capsys.readouterr().out
    assert tf.io.gfile.exists('ram://bucket/model/checkpoints/ckpt-2.index')
    assert tf.io.gfile.exists('ram://bucket/model/export/2/saved_model.pb')
    assert tf.io.gfile.exists(f'ram://bucket/model/{run_state.RUN_JSON}')


@pytest.mark.parametrize('argv, message', [
    (['--epochs', '0'], 'argument --epochs: must be at least 1'),
    (['--eval_split', 'test'], "split 'test' is not in"),
    (['--version', 'nope'], "dataset version 'nope' not found"),
    (['--batch_size', '4096'], 'fewer than one batch of 4096'),
])
def test_user_errors_exit_nonzero_with_one_line(built_dataset, tmp_path, capsys, argv, message):
    assert train.main(['--data', built_dataset, '--model_dir', str(tmp_path / 'm'), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith('train-model: error: ') and message in err


def test_missing_data_dir_from_the_command_line_is_one_line_without_traceback(tmp_path):
    result = subprocess.run([sys.executable, '-m', 'imgrec.training.train', '--data', str(tmp_path / 'missing')],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"train-model: error: no dataset found at {tmp_path / 'missing'}: expected dataset.json or LATEST there"]


def test_training_package_never_imports_apache_beam():
    modules = [f'imgrec.training.{info.name}' for info in pkgutil.iter_modules(training.__path__)]
    assert 'imgrec.training.train' in modules and 'imgrec.training.dataset' in modules
    code = ('import sys\n'
            f'for name in {modules!r}: __import__(name)\n'
            "assert 'apache_beam' not in sys.modules, 'apache_beam was imported'\n")
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
