"""imgrec.training.strategy without a TPU: the resolution order, fast clear failures, the TPU-node storage check.

Nothing here mocks TensorFlow or the network: an unreachable TPU is a real closed local port.
"""
import socket

import pytest
import tensorflow as tf

from imgrec.console.errors import UserError
from imgrec.training import strategy


@pytest.fixture
def closed_port():
    """A local TCP port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_resolution_order_flag_then_tpu_name_then_tpu_vm_chips(tmp_path):
    chip = tmp_path / 'accel0'
    chip.write_text('')
    chips = (str(tmp_path / 'accel[0-9]*'),)
    env = {'TPU_NAME': 'from-env'}
    assert strategy.find_tpu('grpc://10.0.0.2:8470', env, chips) == strategy.TpuTarget('grpc://10.0.0.2:8470', '--tpu')
    assert strategy.find_tpu(None, env, chips) == strategy.TpuTarget('from-env', 'TPU_NAME')
    assert strategy.find_tpu(None, {}, chips).address == 'local'
    assert strategy.find_tpu(None, {}, (str(tmp_path / 'vfio' / '[0-9]*'),)) is None


def test_without_a_tpu_falls_back_to_mirrored_on_the_cpu():
    accelerator = strategy.create(strategy.find_tpu(None, environ={}, device_globs=()))
    assert isinstance(accelerator.strategy, tf.distribute.MirroredStrategy)
    assert accelerator.kind == ('gpu' if tf.config.list_logical_devices('GPU') else 'cpu')
    assert accelerator.num_replicas >= 1 and accelerator.num_input_pipelines == 1


def test_unreachable_tpu_address_fails_fast_with_a_clear_error(closed_port):
    with pytest.raises(UserError, match=rf"TPU 'grpc://127.0.0.1:{closed_port}' \(from --tpu\) is unreachable"):
        strategy.create(strategy.TpuTarget(f'grpc://127.0.0.1:{closed_port}', '--tpu'))


def test_tpu_name_outside_google_cloud_is_a_clear_error(closed_port, monkeypatch):
    monkeypatch.setenv('GCE_METADATA_HOST', f'127.0.0.1:{closed_port}')
    with pytest.raises(UserError, match=r"cannot look up TPU 'my-tpu' \(from TPU_NAME\).*grpc://IP:8470"):
        strategy.create(strategy.TpuTarget('my-tpu', 'TPU_NAME'))


def test_local_tpu_on_a_machine_without_one_is_a_clear_error():
    with pytest.raises(UserError, match=r"cannot use TPU 'local' \(from --tpu\)"):
        strategy.create(strategy.TpuTarget('local', '--tpu'))


def test_tpu_node_needs_gcs_paths_but_a_tpu_vm_does_not():
    node = strategy.TpuTarget('my-tpu', '--tpu')
    with pytest.raises(UserError, match=r'TPU node.*--data /data/out, --model_dir runs/x must be on gs://'):
        strategy.check_storage(node, data='/data/out', model_dir='runs/x')
    with pytest.raises(UserError, match=r'--model_dir runs/x must be on gs://'):
        strategy.check_storage(node, data='gs://bucket/out', model_dir='runs/x')
    strategy.check_storage(node, data='gs://bucket/out', model_dir='gs://bucket/run')
    strategy.check_storage(strategy.TpuTarget('local', '--tpu'), data='/data/out', model_dir='runs/x')
    strategy.check_storage(None, data='/data/out', model_dir='runs/x')
