"""The public API at the root (imgrec/__init__.py): ``imgrec.build``, ``imgrec.load``, ``imgrec.grain_source``.

``import imgrec`` loads neither Beam nor TensorFlow; the three calls take the long paths' arguments; a real
build through ``imgrec.build`` is read back by ``imgrec.load`` and ``imgrec.grain_source`` record for record
as TensorFlow's own parser reads its shards.
"""
import collections
import hashlib
import inspect
import io
import json
import os
import pathlib
import pydoc
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import imgrec
from imgrec.console.errors import UserError
from imgrec.contract import features as F, layout
from imgrec.pipelines import python_api
from imgrec.pipelines.build_result import BuildResult
from imgrec.samples.generate import write_images
from imgrec.training import dataset, grain_input
from imgrec.training.dataset_info import DatasetInfo
from tests.conftest import SMALL

REPO = pathlib.Path(__file__).resolve().parents[1]
PUBLIC = ('build', 'load', 'grain_source')


def test_importing_imgrec_loads_neither_beam_nor_tensorflow():
    heavy = ('apache_beam', 'tensorflow', 'grain')
    code = f'import imgrec, sys; print(sorted(m for m in {heavy!r} if m in sys.modules))'
    done = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, check=True,
                          timeout=60)
    assert done.stdout.strip() == '[]', done.stdout


def test_help_lists_the_three_calls_each_with_an_example():
    page = pydoc.render_doc(imgrec, renderer=pydoc.plaintext)
    functions = page.split('FUNCTIONS', 1)[1]
    for name in PUBLIC:
        assert f'\n    {name}(' in functions, name
        assert 'Example::' in inspect.getdoc(getattr(imgrec, name)), name
    assert imgrec.__all__ == list(PUBLIC)


def _arguments(function):
    """(name, kind, default) of each parameter: what a caller can pass, annotations aside."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize('short, long', [(imgrec.build, python_api.build), (imgrec.load, dataset.load),
                                         (imgrec.grain_source, grain_input.grain_source)])
def test_each_call_takes_the_long_paths_arguments_with_their_defaults(short, long):
    assert _arguments(short) == _arguments(long)


def _digest(pixels):
    return hashlib.sha256(np.ascontiguousarray(pixels, dtype=np.uint8).tobytes()).hexdigest()


def _tensorflow_decode(encoded):
    return tf.io.decode_jpeg(encoded, channels=3).numpy()


def _pillow_decode(encoded):
    with Image.open(io.BytesIO(encoded.numpy())) as image:
        return np.asarray(image.convert('RGB'))


def _parsed_by_tensorflow(document, split, decode):
    """Counter of (label, pixel digest) of the split's TFRecord shards, parsed by tf.io, decoded by ``decode``
    (TensorFlow's, as ``load`` decodes; Pillow's, as Grain's reader does)."""
    spec = {F.IMAGE_ENCODED: tf.io.FixedLenFeature([], tf.string), F.LABEL: tf.io.FixedLenFeature([], tf.int64)}
    paths = [layout.join(document['_directory'], shard['file']) for shard in document['splits'][split]['shards']]
    found: collections.Counter = collections.Counter()
    for record in tf.data.TFRecordDataset(paths):
        example = tf.io.parse_single_example(record, spec)
        found[int(example[F.LABEL]), _digest(decode(example[F.IMAGE_ENCODED]))] += 1
    return found


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """(output folder, dataset.json with its folder) of 20 drawn images built through ``imgrec.build``."""
    folder = tmp_path_factory.mktemp('root_api')
    write_images(str(folder / 'images'), 5, **SMALL)
    output = str(folder / 'out')
    result = imgrec.build(input=str(folder / 'images'), output=output, image_size=32, version='v1',
                          splits={'train': 75, 'validation': 25}, formats=['tfrecord', 'array_record'],
                          progress=False, beam_options=['--direct_running_mode=in_memory'])
    with open(os.path.join(output, 'v1', layout.DATASET_JSON), encoding='utf-8') as stream:
        assert isinstance(result, BuildResult) and result == json.load(stream)
    assert result['counts']['written'] == 20
    return output, dict(result, _directory=os.path.join(output, 'v1'))


def test_load_reads_what_tensorflows_parser_reads_from_the_shards(built):
    output, document = built
    for split in ('train', 'validation'):
        data, info = imgrec.load(output, split, batch_size=4, seed=0, with_info=True, verbose=False)
        assert isinstance(info, DatasetInfo) and info.version == 'v1' and data.class_names == document['labels']
        loaded = collections.Counter((int(label), _digest(image)) for images, labels in data
                                     for image, label in zip(images.numpy(), labels.numpy()))
        assert loaded == _parsed_by_tensorflow(document, split, _tensorflow_decode)
        assert sum(loaded.values()) == document['splits'][split]['num_examples'] > 0


def test_grain_source_reads_every_array_record_once_as_the_tfrecords_hold_them(built):
    output, document = built
    batches = imgrec.grain_source(output, 'train', batch_size=4, seed=3)
    read = collections.Counter((int(label), _digest(image)) for images, labels in batches
                               for image, label in zip(images, labels))
    assert read == _parsed_by_tensorflow(document, 'train', _pillow_decode)
    assert sum(read.values()) == document['splits']['train']['num_examples'] > 0


def test_a_mistake_is_a_one_line_user_error(built, tmp_path):
    output, _ = built
    with pytest.raises(UserError) as raised:
        imgrec.load(output, 'test', verbose=False)
    assert "split 'test' is not in" in str(raised.value) and '\n' not in str(raised.value)
    with pytest.raises(UserError):
        imgrec.grain_source(str(tmp_path / 'nowhere'))
    with pytest.raises(UserError):
        imgrec.build(input=str(tmp_path / 'nowhere'), output=str(tmp_path / 'out'), progress=False)
