"""The distributed input and training path on a CPU split into 2 logical devices (2 replicas).

Logical devices must be configured before TensorFlow initialises, and other test modules have
initialised it already, so the work runs in a subprocess (this module, run as a script) that
reports what each replica received as JSON.
"""
import json
import subprocess
import sys

import pytest

from tests import training_fixtures as fixtures

GLOBAL_BATCH = 8


def _two_replica_report(data, model_dir):
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from imgrec.training import dataset, dataset_version, strategy as strategy_lib, train

    accelerator = strategy_lib.create(strategy_lib.find_tpu(None, environ={}, device_globs=()))
    strategy = accelerator.strategy
    source = dataset_version.open_version(data)
    report = {'replicas': accelerator.num_replicas, 'kind': accelerator.kind}
    for split, training in (('train', True), ('validation', False)):
        reader = dataset.InputReader(source, dataset.InputConfig(split, GLOBAL_BATCH, training))
        distributed = strategy.distribute_datasets_from_function(lambda context: reader.dataset(context))
        per_replica = [[], []]
        for images, labels in distributed:
            for replica, (image_batch, label_batch) in enumerate(zip(strategy.experimental_local_results(images),
                                                                     strategy.experimental_local_results(labels))):
                ids = fixtures.decode_ids(image_batch.numpy())
                real = label_batch.numpy() != dataset.PAD_LABEL
                per_replica[replica].append({'shape': list(image_batch.shape), 'ids': ids[real].tolist()})
        report[split] = per_replica
    report['train_exit'] = train.main(['--data', data, '--epochs', '2', '--batch_size', str(GLOBAL_BATCH),
                                       '--model_dir', model_dir, '--steps_per_execution', '2'])
    print('REPORT ' + json.dumps(report, default=lambda value: np.asarray(value).tolist()))


@pytest.fixture(scope='module')
def report(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('two_replicas'))
    ids = fixtures.write_dataset(root + '/data', {'train': (48, 4), 'validation': (21, 2)})
    result = subprocess.run([sys.executable, '-m', 'tests.test_training_distributed', root + '/data', root + '/model'],
                            capture_output=True, text=True, timeout=300, cwd=fixtures.REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith('REPORT '))
    return json.loads(line[len('REPORT '):]), ids, result.stdout


def test_cpu_is_split_into_two_mirrored_replicas(report):
    data, _, stdout = report
    assert data['replicas'] == 2 and data['kind'] == 'cpu'
    assert 'MirroredStrategy on 2 CPU device(s), 2 replica(s)' in stdout


def test_each_replica_gets_its_own_per_replica_batch(report):
    data, _, _ = report
    for replica in data['train']:
        assert {tuple(batch['shape']) for batch in replica} == {(GLOBAL_BATCH // 2, 32, 32, 3)}
    for first, second in zip(*data['train']):
        assert not set(first['ids']) & set(second['ids'])


@pytest.mark.parametrize('split', ['train', 'validation'])
def test_replicas_together_cover_every_record_of_an_epoch_once(report, split):
    data, ids, _ = report
    seen = [record for replica in data[split] for batch in replica for record in batch['ids']]
    assert sorted(seen) == ids[split]


def test_training_runs_on_two_replicas(report):
    data, _, stdout = report
    assert data['train_exit'] == 0
    assert 'epoch 2/2:' in stdout and 'acc' in stdout
    assert '/21 = ' in stdout  # every validation record counted, padding excluded


if __name__ == '__main__':
    _two_replica_report(sys.argv[1], sys.argv[2])
