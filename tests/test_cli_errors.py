"""User mistakes end with one line naming the problem and a non-zero exit, never a traceback."""
import subprocess
import sys

import pytest

from contract import layout
from pipelines import build_dataset


@pytest.fixture()
def run_main(capsys):
    def run(*argv):
        status = build_dataset.main([*map(str, argv), '--direct_running_mode', 'in_memory'])
        return status, capsys.readouterr().err.strip()
    return run


@pytest.mark.parametrize('args, message', [
    (['--output', 'out'], 'one of the arguments --input --manifest is required'),
    (['--input', 'nowhere/at/all', '--output', 'out'], 'input folder not found: nowhere/at/all'),
    (['--manifest', 'missing.csv', '--output', 'out'], 'manifest not found: missing.csv'),
    (['--input', '{images}', '--output', 'out', '--splits', 'train:90'], '--splits must look like'),
    (['--input', '{images}', '--output', 'out', '--splits', 'train=0'], '--splits values must be at least 1'),
    (['--input', '{images}', '--output', 'out', '--image_size', '0'], '--image_size must be at least 1x1'),
    (['--input', '{images}', '--output', 'out', '--image_size', 'big'], '--image_size must be N or HxW'),
    (['--input', '{images}', '--output', 'out', '--num_shards', 'test=2'], 'not in --splits: test'),
    (['--input', '{images}', '--output', 'out', '--jpeg_quality', '101'], '--jpeg_quality must be between'),
    (['--input', '{images}', '--output', 'out', '--labels', 'no-such-labels.txt'], '--labels file not found'),
    (['--input', '{images}', '--output', 'out', '--resize', 'squash'], "invalid choice: 'squash'"),
])
def test_bad_arguments(run_main, sample_images, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    status, err = run_main(*(a.format(images=sample_images) for a in args))
    assert status == 2
    assert err.startswith('build-dataset: error: ') and message in err and '\n' not in err


def test_empty_input(run_main, tmp_path):
    (tmp_path / 'images' / 'cat').mkdir(parents=True)
    (tmp_path / 'images' / 'cat' / 'notes.txt').write_text('no images here')
    status, err = run_main('--input', tmp_path / 'images', '--output', tmp_path / 'out')
    assert status == 2 and 'no images found under' in err and '\n' not in err


def test_existing_version_is_not_overwritten(run_main, built_dataset, sample_images):
    status, err = run_main('--input', sample_images, '--output', built_dataset, '--version', 'v1')
    assert status == 2 and 'version v1 already exists' in err


def test_a_build_that_writes_nothing_fails_without_publishing(run_main, tmp_path):
    (tmp_path / 'images' / 'cat').mkdir(parents=True)
    (tmp_path / 'images' / 'cat' / 'page.jpg').write_text('<html>not found</html>')
    status, err = run_main('--input', tmp_path / 'images', '--output', tmp_path / 'out')
    assert status == 1 and err.startswith('build-dataset: failed: ') and '\n' not in err
    assert not (tmp_path / 'out' / layout.LATEST).exists()


def test_the_command_line_exits_non_zero_without_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, '-m', 'pipelines.build_dataset', '--input', str(tmp_path),
                             '--output', str(tmp_path / 'out'), '--image_size', '0'],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == 'build-dataset: error: --image_size must be at least 1x1, got \'0\''
