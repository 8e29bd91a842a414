"""training.grain_source (training/grain_input.py) and its caller examples/grain_reader.py: a version's
ArrayRecord shards through Grain, every record once an epoch in a global shuffle, resumed mid-epoch from
Grain's own iterator state, without TensorFlow."""
import collections
import hashlib
import json
import pathlib
import subprocess
import sys

import pytest

from imgrec import training
from imgrec.contract import layout
from imgrec.contract.tfrecord import read_records
from imgrec.console.errors import UserError
from tests.conftest import build
from imgrec.training import grain_input

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = REPO / 'examples' / 'grain_reader.py'


@pytest.fixture(scope='module')
def version(sample_images, tmp_path_factory):
    """``sample_images`` built with both formats: 3 train shards."""
    output = build(sample_images, tmp_path_factory.mktemp('grain'), '--splits', 'train=75,validation=25',
                   '--num_shards', 'train=3,validation=1', '--version', 'v1', '--formats', 'tfrecord,array_record')
    return grain_input.open_version(output)


def _key(image, label):
    return int(label), hashlib.sha256(image.tobytes()).hexdigest()


def _stream(batches):
    """The (label, image digest) of every element of a batch iterator, in order."""
    return [_key(image, label) for images, labels in batches for image, label in zip(images, labels)]


def _tfrecord_elements(ref, split):
    """{key: shard number} of the records of the TFRecord shards, parsed the example's way."""
    parse = grain_input.ParseExample()
    found = {}
    for number, shard in enumerate(ref.document['splits'][split]['shards']):
        with open(layout.join(ref.directory, shard['file']), 'rb') as stream:
            for record in read_records(stream):
                found[_key(*parse.map(record))] = number
    return found


def test_every_record_once_an_epoch_in_a_new_global_shuffle(version):
    paths = grain_input.array_record_paths(version, 'train')
    shard_of = _tfrecord_elements(version, 'train')
    in_shards, count = list(shard_of), len(shard_of)
    assert count == version.document['splits']['train']['num_examples'] and len(paths) == 3
    batches = list(grain_input.batches(paths, batch_size=8, seed=7, num_epochs=2))
    images, labels = batches[0]
    assert images.dtype.name == 'uint8' and images.shape == (8, 32, 32, 3) and labels.shape == (8,)
    stream = _stream(batches)
    first, second = stream[:count], stream[count:]
    assert collections.Counter(first) == collections.Counter(second) == collections.Counter(in_shards)
    assert first != in_shards and first != second  # shuffled, and each epoch anew
    # Global: the first records of an epoch come from more than one shard.
    assert len({shard_of[key] for key in first[:6]}) > 1


def test_a_new_iterator_resumes_mid_epoch_from_grains_state(version):
    paths = grain_input.array_record_paths(version, 'train')
    whole = _stream(grain_input.batches(paths, batch_size=4, seed=3))
    iterator = iter(grain_input.batches(paths, batch_size=4, seed=3))
    start = _stream(next(iterator) for _ in range(3))
    state = json.loads(json.dumps(iterator.get_state()))  # as a checkpoint would keep it
    resumed = iter(grain_input.batches(paths, batch_size=4, seed=3))
    resumed.set_state(state)
    assert start + _stream(resumed) == whole
    assert len(whole) == len(set(whole)) == version.document['splits']['train']['num_examples']


def test_the_example_runs_without_tensorflow_and_resumes_from_its_state_file(version, tmp_path):
    state = tmp_path / 'state.json'
    code = ('import runpy, sys; sys.argv = sys.argv[1:]\n'
            'try:\n    runpy.run_path(sys.argv[0], run_name="__main__")\n'
            'except SystemExit as done:\n    assert not done.code, done.code\n'
            'print("tensorflow loaded:", "tensorflow" in sys.modules)\n')
    args = [sys.executable, '-c', code, str(EXAMPLE), version.output, '--split', 'validation', '--batch_size', '2',
            '--state', str(state)]
    first = subprocess.run(args, capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    count = version.document['splits']['validation']['num_examples']
    assert f'{count} records in batches of 2' in first and 'tensorflow loaded: False' in first
    assert json.loads(state.read_text()) == {'next_index': -(-count // 2)}
    again = subprocess.run(args, capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert 'nothing left to read' in again  # the state said the epoch was done


def test_grain_source_is_importable_and_reads_a_version_by_its_path(version):
    code = ('import sys, training\n'
            f'batches = training.grain_source({version.output!r}, "validation", batch_size=2, seed=4)\n'
            'print(sum(len(labels) for _, labels in batches), "tensorflow" in sys.modules)\n')
    run = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True, cwd=REPO)
    assert run.stdout.split() == [str(version.document['splits']['validation']['num_examples']), 'False']
    by_path = _stream(training.grain_source(version.directory, 'train', batch_size=4, seed=3))
    assert by_path == _stream(grain_input.batches(grain_input.array_record_paths(version, 'train'), batch_size=4,
                                                   seed=3))


@pytest.mark.parametrize('call, message', [
    (dict(split='test'), "split 'test' is not in"),
    (dict(version='v9'), "dataset version 'v9' not found"),
])
def test_grain_source_mistakes_are_one_line_user_errors(version, call, message):
    with pytest.raises(UserError, match=message):
        training.grain_source(version.output, **call)


def test_a_version_without_array_record_shards_is_named(built_dataset):
    with pytest.raises(UserError, match='--formats tfrecord,array_record'):
        training.grain_source(built_dataset)
