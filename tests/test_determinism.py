"""Same inputs and options, same bytes: across runs, runner modes and worker counts."""
import os

from imgrec.pipelines import launcher
from tests.conftest import build
from tests.contract_checks import load_version, shard_files

OPTIONS = ('--splits', 'train=80,validation=20', '--num_shards', 'train=3,validation=2', '--version', 'v')


def _outputs(output):
    """(shard bytes, dataset.json less what names the run, labels.txt) of the latest version."""
    version_dir, document = load_version(output)
    document.pop('created')
    document['options'].pop('output')
    return shard_files(version_dir), document, open(os.path.join(version_dir, 'labels.txt')).read()


def test_two_builds_give_identical_bytes(sample_images, tmp_path):
    first = _outputs(build(sample_images, tmp_path / 'first', *OPTIONS))
    second = _outputs(build(sample_images, tmp_path / 'second', *OPTIONS))
    assert len(first[0]) == 5
    assert first == second


def test_one_and_two_worker_processes_give_identical_bytes(sample_images, tmp_path):
    one = build(sample_images, tmp_path / 'one', *OPTIONS, '--direct_num_workers', '1', mode='multi_processing')
    two = build(sample_images, tmp_path / 'two', *OPTIONS, '--direct_num_workers', '2', mode='multi_processing')
    memory = build(sample_images, tmp_path / 'memory', *OPTIONS)
    assert _outputs(one)[0] == _outputs(two)[0] == _outputs(memory)[0]


def test_the_default_mode_and_decode_threads_give_identical_bytes(sample_images, tmp_path):
    """The default at scale (a worker process per core: named here, a build this small runs in_memory by
    default), in_memory decoding on a thread per core, and in_memory with one decode thread: the same
    shards, index and dataset.json."""
    default = str(tmp_path / 'default')
    launcher.run(['--input', sample_images, '--output', default, '--image_size', '32', *OPTIONS,
                       '--direct_running_mode', 'multi_processing'])
    threads = build(sample_images, tmp_path / 'threads', *OPTIONS)
    one = build(sample_images, tmp_path / 'one', *OPTIONS, '--direct_num_workers', '1')
    assert _outputs(default) == _outputs(threads) == _outputs(one)
