"""train-model's options become one frozen TrainConfig, built once from the command line."""
import dataclasses
import datetime
import os

import pytest

from imgrec.training import train
from imgrec.training.config import TrainConfig

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def test_a_command_line_gives_the_config_it_names():
    config = train.parse_config(['--data', 'gs://bucket/data', '--version', 'v3', '--epochs', '3', '--no-augment',
                                 '--cycle_length', '4', '--shuffle_buffer', '64', '--learning_rate', '0.01',
                                 '--batch_size', '16', '--checkpoint_steps', '5', '--tpu', 'local',
                                 '--mixed_precision', 'mixed_float16', '--jit_compile', '--quiet', '--model_dir', 'm'])
    assert config == TrainConfig(data='gs://bucket/data', model_dir='m', version='v3', epochs=3, augment=False,
                                 cycle_length=4, shuffle_buffer=64, learning_rate=0.01, batch_size=16,
                                 checkpoint_steps=5, tpu='local', mixed_precision='mixed_float16', jit_compile=True,
                                 quiet=True)


def test_every_default_of_the_command_line_is_the_configs():
    assert train.parse_config(['--data', 'd', '--model_dir', 'm']) == TrainConfig(data='d', model_dir='m')


def test_without_model_dir_the_run_gets_one_named_by_its_start_time():
    config = train.parse_config(['--data', 'd'], now=NOW)
    assert config.model_dir == os.path.join('runs', '20260102T030405Z')


def test_the_config_cannot_change_once_built():
    config = train.parse_config(['--data', 'd', '--model_dir', 'm'])
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 1


def test_learning_rate_and_shifts_default_by_model_and_a_given_learning_rate_wins():
    def config(*argv):
        return train.parse_config(['--data', 'd', '--model_dir', 'm', *argv])
    assert config().initial_learning_rate == config('--model', 'mobilenet_v2').initial_learning_rate == 3e-3
    assert config('--model', 'resnet50').initial_learning_rate == 1e-3
    assert config('--model', 'resnet50', '--learning_rate', '0.003').initial_learning_rate == 3e-3
    assert config().max_shift == 0 and config('--model', 'resnet50', '--no_augment').max_shift == 0
    assert config('--model', 'resnet50').max_shift == config('--model', 'mobilenet_v2').max_shift == 0.125
