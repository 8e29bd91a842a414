"""The Python API (docs/python-api.md): build() is the command line's build with keyword arguments, load()
the training reader as (image, label) pairs; the page's notebook example runs."""
import collections
import dataclasses
import json
import logging
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from imgrec.contract import layout
from imgrec.imaging.record_options import RecordOptions
from imgrec.console.errors import BuildFailed, CommandError, UserError
from imgrec.pipelines import build_dataset, options, python_api
from imgrec.pipelines.build_result import BuildResult
from tests.conftest import build as cli_build, listing
from imgrec import training
from imgrec.training import dataset, dataset_version, quiet
from imgrec.training.dataset_info import DatasetInfo

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGE = REPO / 'docs' / 'python-api.md'


def _config(argv):
    config, beam_args = options.parse_args(argv)
    return {**config.describe(), 'run': (config.full, config.force, config.keep_versions, config.clean,
                                         config.verbose, config.retry_deadline, config.progress,
                                         config.progress_interval)}, beam_args


def _keywords(keywords):
    config = options.config_from_keywords(keywords)
    return {**config.describe(), 'run': (config.full, config.force, config.keep_versions, config.clean,
                                         config.verbose, config.retry_deadline, config.progress,
                                         config.progress_interval)}, []


def test_build_makes_the_command_lines_config_from_its_keywords_without_argv():
    required = {'input': 'in', 'output': 'out', 'version': 'v1'}
    assert _keywords(required) == _config(['--input', 'in', '--output', 'out', '--version', 'v1'])
    given = dict(required, image_size=(48, 64), splits={'train': 80, 'validation': 20}, num_shards={'train': 3},
                 formats=['array_record', 'tfrecord'], stratify=True, progress=False, max_error_rate=0.5,
                 labels=None)
    argv = ['--input', 'in', '--output', 'out', '--version', 'v1', '--image_size', '48x64', '--splits',
            'train=80,validation=20', '--num_shards', 'train=3', '--formats', 'tfrecord,array_record', '--stratify',
            '--progress', 'off', '--max_error_rate', '0.5']
    assert _keywords(given) == _config(argv)
    # What was given is known alike (labels=None is not given), and the command line's spellings work too.
    assert options.config_from_keywords(given).given == options.parse_args(argv)[0].given == frozenset(
        {'input', 'output', 'version', 'image_size', 'splits', 'num_shards', 'formats', 'stratify', 'progress',
         'max_error_rate'})
    assert _keywords(dict(required, image_size='48x64', splits='train=80,validation=20', stratify='true')) == \
        _config(['--input', 'in', '--output', 'out', '--version', 'v1', '--image_size', '48x64', '--splits',
                 'train=80,validation=20', '--stratify'])


@pytest.mark.parametrize('change, message', [
    (dict(record_options=((0, 5),)), "--image_size must be at least 1x1, got '0x5'"),
    (dict(record_options=((9000, 10),)), "--image_size must be at most 8192 a side, got '9000x10'"),
    (dict(record_options=((8, 8), 'crop', 0)), '--jpeg_quality must be between 1 and 100, got 0'),
    (dict(record_options=((8, 8), 'squash')), "--resize must be one of crop, pad, stretch"),
    (dict(splits=(('train', 0),)), "--splits values must be at least 1, got 'train=0'"),
    (dict(splits=(('train', 1), ('train', 2))), "--splits names a split twice: 'train=1,train=2'"),
    (dict(num_shards={'test': 2}), '--num_shards names split(s) not in --splits: test'),
    (dict(max_error_rate=2.0), '--max_error_rate is a fraction between 0 and 1'),
    (dict(version='no/slash'), '--version'),
    (dict(formats=('array_record',)), '--formats must include tfrecord'),
    (dict(near_duplicates='maybe'), '--near_duplicates must be one of group, report, off'),
    (dict(output='/'), '--output must name a folder or gs:// prefix below the root'),
    (dict(input=None), 'one of the arguments --input --manifest is required'),
])
def test_configs_check_themselves_in_the_command_lines_words(change, message):
    """BuildConfig and RecordOptions refuse a bad value however they are made (``__post_init__``): by the
    command line, by build(), or by hand, in the one line the command line gives."""
    config = options.parse_args(['--input', 'in', '--output', 'out', '--version', 'v1'])[0]
    with pytest.raises(UserError) as raised:
        if 'record_options' in change:
            RecordOptions(*change['record_options'])
        else:
            dataclasses.replace(config, **change)
    assert message in str(raised.value) and '\n' not in str(raised.value)


def test_the_command_line_and_build_give_the_same_line_for_the_same_mistake(tmp_path, capsys):
    for keyword, argv in (({'jpeg_quality': 101}, ['--jpeg_quality', '101']),
                          ({'splits': {'train': 0}}, ['--splits', 'train=0']),
                          ({'image_size': 9000}, ['--image_size', '9000']),
                          ({'keep_versions': 0}, ['--keep_versions', '0'])):
        with pytest.raises(UserError) as raised:
            python_api.build(input=str(tmp_path), output=str(tmp_path / 'out'), **keyword)
        assert build_dataset.main(['--input', str(tmp_path), '--output', str(tmp_path / 'out'), *argv]) == 2
        assert capsys.readouterr().err.strip() == f'build-dataset: error: {raised.value}'


@pytest.mark.parametrize('call, message', [
    (dict(imagesize=32), "build() got an unknown option 'imagesize' (did you mean 'image_size'?)"),
    (dict(runner='DataflowRunner'), "unknown option 'runner'; Beam's own options go in beam_options="),
    (dict(image_size=0), "--image_size must be at least 1x1, got '0'"),
    (dict(formats='array_record'), '--formats must include tfrecord'),
    (dict(beam_options=['--direct_num_wrokers=2']), 'unknown option --direct_num_wrokers (did you mean '
                                                    '--direct_num_workers?)'),
])
def test_build_mistakes_raise_one_user_error_of_one_line(tmp_path, call, message):
    with pytest.raises(UserError) as raised:
        python_api.build(input=str(tmp_path), output=str(tmp_path / 'out'), **call)
    assert message in str(raised.value) and '\n' not in str(raised.value)


def test_build_of_a_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError) as raised:
        python_api.build(input=str(tmp_path / 'nowhere'), output=str(tmp_path / 'out'))
    assert str(tmp_path / 'nowhere') in str(raised.value)


def test_build_returns_the_published_dataset_json_and_shows_nothing_of_beams(sample_images, tmp_path, capfd, caplog):
    caplog.set_level(logging.INFO)
    output = str(tmp_path / 'out')
    document = python_api.build(input=sample_images, output=output, image_size=32, version='v1', progress=False,
                                   beam_options=['--direct_running_mode=multi_processing',
                                                 '--direct_num_workers=1'])
    with open(os.path.join(output, 'v1', layout.DATASET_JSON)) as stream:
        assert document == json.load(stream)
    assert document['counts']['written'] == 60 and document['record_options']['image_size'] == [32, 32]
    captured = capfd.readouterr()
    assert captured.err == ''  # the workers' lines and Beam's warnings were held back
    assert not [r for r in caplog.records if r.name.startswith('apache_beam') and r.levelno >= logging.WARNING]
    assert logging.getLogger('apache_beam').level == logging.NOTSET  # and the levels are the user's again
    # Nothing changed: no new version, and the one LATEST names comes back.
    again = python_api.build(input=sample_images, output=output, image_size=32, version='v2', progress=False,
                                beam_options=['--direct_running_mode=in_memory'])
    assert again == document and listing(output) == [layout.LATEST, 'v1']


def test_build_returns_a_result_that_shows_the_command_lines_summary(sample_images, tmp_path, capsys):
    cli_output, api_output = str(tmp_path / 'cli'), str(tmp_path / 'api')
    assert build_dataset.main(['--input', sample_images, '--output', cli_output, '--image_size', '32', '--version',
                               'v1', '--splits', 'train=75,validation=25', '--progress', 'off',
                               '--direct_running_mode', 'in_memory']) == 0
    printed = capsys.readouterr().out
    options = dict(image_size=32, version='v1', splits={'train': 75, 'validation': 25}, progress=False,
                   beam_options=['--direct_running_mode=in_memory'])
    result = python_api.build(input=sample_images, output=api_output, **options)
    assert isinstance(result, BuildResult) and isinstance(result, dict) and result['version'] == 'v1'
    assert repr(result) == str(result) == printed.replace(cli_output, api_output).rstrip('\n')
    assert 'asked 75.0%' in repr(result)
    page = result._repr_html_()
    for name, split in result['splits'].items():
        assert (f"<tr><td>{name}</td><td>{split['num_examples']}</td><td>{split['share']:.1%}</td>"
                f"<td>{split['requested_share']:.1%}</td><td>{split['num_shards']}</td></tr>") in page
    assert f"wrote {result['counts']['written']} of {result['counts']['inputs']} images" in page
    again = python_api.build(input=sample_images, output=api_output, **dict(options, version='v2'))
    assert again == result and repr(again).startswith('build-dataset: nothing changed since version v1')


def test_a_build_that_cannot_publish_raises_build_failed(tmp_path):
    images = tmp_path / 'images'
    (images / 'cats').mkdir(parents=True)
    (images / 'cats' / 'broken.jpg').write_bytes(b'\xff\xd8\xff not really a JPEG')
    with pytest.raises(BuildFailed) as raised:
        python_api.build(input=str(images), output=str(tmp_path / 'out'), progress=False,
                            beam_options=['--direct_running_mode=in_memory'])
    assert isinstance(raised.value, CommandError) and 'LATEST not updated' in str(raised.value)
    assert not os.path.exists(tmp_path / 'out' / layout.LATEST)


def _pairs(data):
    """Counter of (label, image bytes) in a dataset of (image, label), batched or not."""
    found = collections.Counter()
    for images, labels in data:
        if images.shape.rank == 3:
            images, labels = images[None], labels[None]
        for image, label in zip(images.numpy(), labels.numpy()):
            found[(int(label), image.tobytes())] += 1
    return found


def _training_reader_pairs(output, split):
    config = dataset.InputConfig(split=split, global_batch_size=1, is_training=False)
    return _pairs(dataset.InputReader(dataset_version.open_version(output), config).dataset())


def test_load_gives_every_record_once_as_image_label_pairs(built_dataset):
    version = dataset_version.open_version(built_dataset)
    for split in ('train', 'validation'):
        expected = _training_reader_pairs(built_dataset, split)
        assert sum(expected.values()) == version.num_examples(split)
        unbatched = dataset.load(built_dataset, split, seed=1)
        assert unbatched.element_spec == (tf.TensorSpec((32, 32, 3), tf.uint8), tf.TensorSpec((), tf.int32))
        assert _pairs(unbatched) == expected
        batched = dataset.load(version.directory, split, batch_size=4, shuffle=False)
        assert [int(labels.shape[0]) for _, labels in batched][-1] == version.num_examples(split) % 4 or 4
        assert _pairs(batched) == expected
    as_dicts = dataset.load(built_dataset, 'validation', version='v1', as_supervised=False, shuffle=False)
    assert set(as_dicts.element_spec) == {'image', 'label'}


def test_load_shuffles_by_its_seed(built_dataset):
    def order(**kwargs):
        return [int(label) for _, label in dataset.load(built_dataset, 'train', **kwargs)]
    in_order = order(shuffle=False)
    assert order(seed=5) == order(seed=5) != in_order
    assert sorted(order(seed=5)) == sorted(in_order)


def test_load_reads_a_url_through_tensorflows_file_system(built_dataset):
    """TensorFlow's ram:// file system stands in for gs://: no local file API on the way."""
    version_dir = dataset_version.open_version(built_dataset).directory
    for name in tf.io.gfile.listdir(version_dir):
        if not tf.io.gfile.isdir(os.path.join(version_dir, name)):
            tf.io.gfile.copy(os.path.join(version_dir, name), f'ram://api/data/v1/{name}', overwrite=True)
    tf.io.gfile.copy(os.path.join(built_dataset, layout.LATEST), f'ram://api/data/{layout.LATEST}', overwrite=True)
    assert _pairs(dataset.load('ram://api/data', 'validation')) == _training_reader_pairs(built_dataset, 'validation')


@pytest.mark.parametrize('call, error, message', [
    (dict(split='test'), UserError, "split 'test' is not in dataset"),
    (dict(version='v9'), UserError, "dataset version 'v9' not found"),
    (dict(batch_size=0), UserError, 'batch_size must be a positive whole number'),
    (dict(image_size=(0, 5)), UserError, 'image_size must be N or (height, width) of positive whole numbers'),
    (dict(image_size=32, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True), UserError, 'cannot both be set'),
    (dict(label_mode='binary'), UserError, "label_mode must be one of int, categorical, got 'binary'"),
])
def test_load_mistakes_are_one_line(built_dataset, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        dataset.load(built_dataset, **call)


def test_load_gives_class_names_and_with_info_as_keras_and_tfds_do(built_dataset, capsys):
    version = dataset_version.open_version(built_dataset)
    loaded = training.load(built_dataset, 'validation', batch_size=4)
    assert loaded.class_names == version.labels
    assert capsys.readouterr().out == (f"Found {version.num_examples('validation')} images belonging to "
                                       f"{len(version.labels)} classes in split 'validation' of {version.directory}.\n")
    data, info = training.load(built_dataset, 'train', with_info=True, verbose=False)
    assert capsys.readouterr().out == ''
    assert isinstance(info, DatasetInfo) and info.class_names == data.class_names == version.labels
    assert (info.version, info.directory, info.num_classes, info.image_shape) == ('v1', version.directory, 4, (32, 32, 3))
    assert info.splits == {split: version.num_examples(split) for split in ('train', 'validation')}
    assert info.document == version.metadata


def _first_batch(**options):
    images, labels = next(iter(dataset.load(**options)))
    return images.numpy(), labels.numpy()


def test_load_resizes_and_one_hot_encodes_as_image_dataset_from_directory(built_dataset):
    common = dict(data=built_dataset, split='validation', batch_size=8, shuffle=False, verbose=False)
    stored, labels = _first_batch(**common)
    assert stored.shape == (8, 32, 32, 3)
    same, _ = _first_batch(**common, image_size=32)
    assert (same == stored).all()  # the stored size: no resampling
    stretched, _ = _first_batch(**common, image_size=(16, 24))
    cropped, _ = _first_batch(**common, image_size=(16, 24), crop_to_aspect_ratio=True)
    padded, _ = _first_batch(**common, image_size=(16, 24), pad_to_aspect_ratio=True)
    assert stretched.shape == cropped.shape == padded.shape == (8, 16, 24, 3) and stretched.dtype == np.uint8
    assert padded[:, :, :4].max() == padded[:, :, -4:].max() == 0  # a square fitted inside 16x24: black sides
    assert cropped[:, :, :4].max() > 0 and (cropped != stretched).any()
    _, one_hot = _first_batch(**common, label_mode='categorical')
    assert one_hot.dtype == np.float32 and (one_hot.sum(axis=1) == 1).all() and (one_hot.argmax(axis=1) == labels).all()


# A line TensorFlow or absl writes to stderr, reduced to what names it: a C++ log line by its source
# (file:line), any other line as it is. Times, thread ids and the data differ from run to run.
_CPP_LOG_LINE = re.compile(r'^[IWEF]\d{4} [\d:.]+\s+\d+ ([^\]\s]+)\]')
# What the child does: TensorFlow's C++ warning of a partly read cache, TensorFlow's and absl's Python
# loggers, then the notebook's load(). Only the user's environment differs between the two runs.
_LOAD_AND_LOG = '''
from imgrec import training
data = training.load({data!r}, "validation", batch_size=4, image_size=16, verbose=False)
import absl.logging, tensorflow as tf
partly_read = iter(tf.data.Dataset.range(4).cache())
next(partly_read)
del partly_read
tf.get_logger().warning('a tensorflow logger warning')
absl.logging.warning('an absl warning')
print(sum(int(labels.shape[0]) for _, labels in data))
'''


def _stderr_sources(data, **environment):
    """The stderr lines of the child above, by what names each, with ``environment`` as the user's."""
    child = {name: value for name, value in os.environ.items() if name != quiet.TF_LOG_LEVEL}
    run = subprocess.run([sys.executable, '-c', _LOAD_AND_LOG.format(data=data)], capture_output=True, text=True,
                         check=True, cwd=REPO, env={**child, **environment}, timeout=300)
    assert int(run.stdout) == dataset_version.open_version(data).num_examples('validation')
    return {(match[1] if (match := _CPP_LOG_LINE.match(line)) else line.strip())
            for line in run.stderr.splitlines() if line.strip()}


def test_load_keeps_tensorflows_log_lines_off_stderr_as_the_strictest_setting_would(built_dataset):
    # Which lines TensorFlow writes depends on the CPU and the build, and some (absl's, before it is set
    # up: oneDNN's notice on some CPUs) ignore TF_CPP_MIN_LOG_LEVEL altogether. So the bar is a user who
    # set the variable to 3 (fatal only) before starting Python: importing training must write no line
    # that such a user would not see.
    quieted = _stderr_sources(built_dataset)
    strictest = _stderr_sources(built_dataset, **{quiet.TF_LOG_LEVEL: '3'})
    assert quieted <= strictest, sorted(quieted - strictest)  # the partly read cache's warning among them
    assert not {'a tensorflow logger warning', 'an absl warning'} & quieted


def test_quiet_sets_only_what_the_user_left_unset_and_restore_undoes_it(monkeypatch):
    quiet.restore()  # what importing training did
    monkeypatch.setenv(quiet.TF_LOG_LEVEL, '0')
    absl, tensorflow_logger = logging.getLogger('absl'), logging.getLogger('tensorflow')
    absl.setLevel(logging.INFO)
    tensorflow_logger.setLevel(logging.NOTSET)
    try:
        quiet.quiet()
        assert (os.environ[quiet.TF_LOG_LEVEL], absl.level, tensorflow_logger.level) == ('0', logging.INFO,
                                                                                        logging.ERROR)
        quiet.restore()  # train-model --verbose
        assert (os.environ[quiet.TF_LOG_LEVEL], absl.level, tensorflow_logger.level) == ('0', logging.INFO,
                                                                                        logging.NOTSET)
    finally:
        absl.setLevel(logging.NOTSET)
        quiet.quiet()  # as importing training left them


# The page shows a notebook's sizes; here they shrink, as tests/test_docs_commands.py shrinks commands.
_SMALLER = [(r"write_images\('data/notebook/images', 40\)", "write_images('data/notebook/images', 6)"),
            (r'image_size=64', 'image_size=32'), (r'\(64, 64, 3\)', '(32, 32, 3)'), (r'epochs=3', 'epochs=1'),
            (r'batch_size=32', 'batch_size=8'), (r'\(32, 64, 64, 3\)', '(8, 32, 32, 3)')]


def test_the_pages_notebook_example_runs(tmp_path, monkeypatch):
    block = re.search(r'^```python\n(.*?)^```', PAGE.read_text(), re.MULTILINE | re.DOTALL)[1]
    for pattern, small in _SMALLER:
        block, replaced = re.subn(pattern, small, block)
        assert replaced, pattern  # the page still shows it
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(block, str(PAGE), 'exec'), scope)  # pylint: disable=exec-used
    assert scope['document']['formats'] == ['tfrecord', 'array_record']
    assert scope['images'].dtype == tf.uint8 and len(scope['history'].history['loss']) == 1
    assert scope['train'].class_names == scope['info'].class_names == scope['document']['labels']
    assert (tmp_path / 'data' / 'notebook' / 'records' / layout.LATEST).is_file()
