"""Resume after preemption: a training subprocess SIGKILLed mid-epoch, then restarted on the same model_dir.

The subprocess is this module run as a script: ``imgrec.training.train`` with a model whose first layer writes
the record ids of every training batch it receives to a trace file (one line a step), and sleeps a
little so the test can kill it mid-epoch. The traces show which records each run trained on.
"""
import os
import re
import signal
import subprocess
import sys
import time

import tensorflow as tf

from tests import training_fixtures as fixtures
from imgrec.training import run_state

STEPS_PER_EPOCH, EPOCHS, BATCH, CHECKPOINT_STEPS = 8, 2, 8, 3
KILL_AFTER_LINES = STEPS_PER_EPOCH + 2  # step 10 started, so the checkpoint at step 9 is on disk


def _recording_train(trace_path, delay_s, argv):
    import keras
    import numpy as np

    from imgrec.training import loop, model as model_lib, train

    class RecordIds(keras.layers.Layer):
        """Passes images through; while training, appends their record ids to the trace file."""

        def call(self, images, training=None):
            if not training:
                return images

            def record(batch):
                with open(trace_path, 'a') as trace:
                    trace.write(' '.join(str(i) for i in fixtures.decode_ids(batch.numpy())) + '\n')
                time.sleep(delay_s)
                return np.int32(0)

            with tf.control_dependencies([tf.py_function(record, [images], tf.int32)]):
                return tf.identity(images)

    model_lib.MODELS['recording_cnn'] = lambda images: model_lib.small_cnn(RecordIds()(images))
    # The batch-norm statistics pass after each epoch also calls the model in training mode, on the epoch's
    # first batches: its lines would read as training steps. It trains nothing and reads no position.
    loop.DistributedSteps._recompute_fn = lambda self, iterator, steps: None  # pylint: disable=protected-access
    sys.exit(train.main([*argv, '--model', 'recording_cnn']))


def _trace(path):
    with open(path) as f:
        return [[int(i) for i in line.split()] for line in f.read().splitlines(keepends=True) if line.endswith('\n')]


def _start(tmp_path, name, delay_s, argv):
    out = open(tmp_path / f'{name}.out', 'w')
    process = subprocess.Popen([sys.executable, '-m', 'tests.test_training_resume', str(tmp_path / f'{name}.trace'),
                                str(delay_s), *argv], stdout=out, stderr=subprocess.STDOUT, cwd=fixtures.REPO_ROOT)
    return process, tmp_path / f'{name}.out'


def test_run_killed_mid_epoch_resumes_at_the_step_without_repeating_records(tmp_path):
    ids = fixtures.write_dataset(str(tmp_path / 'data'), {'train': (STEPS_PER_EPOCH * BATCH, 4), 'validation': (16, 2)})
    model_dir = str(tmp_path / 'model')
    argv = ['--data', str(tmp_path / 'data'), '--epochs', str(EPOCHS), '--batch_size', str(BATCH),
            '--checkpoint_steps', str(CHECKPOINT_STEPS), '--model_dir', model_dir]
    (tmp_path / 'killed.trace').touch()

    killed, killed_out = _start(tmp_path, 'killed', 0.3, argv)
    deadline = time.monotonic() + 240
    while len(_trace(tmp_path / 'killed.trace')) < KILL_AFTER_LINES:
        assert killed.poll() is None, killed_out.read_text()[-3000:]
        assert time.monotonic() < deadline, 'training never reached the second epoch'
        time.sleep(0.05)
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL

    resumed, resumed_out = _start(tmp_path, 'resumed', 0, argv)
    assert resumed.wait(timeout=240) == 0, resumed_out.read_text()[-3000:]
    output = resumed_out.read_text()
    start = int(re.search(r'resuming from step (\d+): epoch 2, step (\d+) of 8', output).group(1))
    assert start % CHECKPOINT_STEPS == 0 and STEPS_PER_EPOCH < start < EPOCHS * STEPS_PER_EPOCH

    before, after = _trace(tmp_path / 'killed.trace'), _trace(tmp_path / 'resumed.trace')
    assert sorted(sum(before[:STEPS_PER_EPOCH], [])) == ids['train']
    assert len(after) == EPOCHS * STEPS_PER_EPOCH - start, 'the resumed run must take exactly the missing steps'
    resumed_epoch = sum(before[STEPS_PER_EPOCH:start] + after, [])
    assert sorted(resumed_epoch) == ids['train'], 'every record exactly once in the resumed epoch'
    assert [line.split(':')[0] for line in output.splitlines() if line.startswith('epoch ')] == ['epoch 2/2']

    latest = tf.train.latest_checkpoint(f'{model_dir}/{run_state.CHECKPOINTS}')
    for counter in ('step', 'optimizer/_iterations'):
        assert tf.train.load_variable(latest, f'{counter}/.ATTRIBUTES/VARIABLE_VALUE') == EPOCHS * STEPS_PER_EPOCH


if __name__ == '__main__':
    _recording_train(sys.argv[1], float(sys.argv[2]), sys.argv[3:])
