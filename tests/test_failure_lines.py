"""Every failure is one line with its cause: a worker's exception, not the runner's wrapper around its
traceback; a process or worker killed by a signal (out of memory), with what it printed kept; a training
input that disagrees with dataset.json, naming the shard and record and with TensorFlow's own message."""
import json
import os
import re
import signal
import subprocess
import sys

import apache_beam as beam
import psutil
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner

from imgrec.contract import layout
from imgrec.console.command import Command
from imgrec.storage.byte_ranges import checked_range
from tests import launcher, training_fixtures as fixtures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIVE_UP_S = 600  # a safety net against a hang, not a timing threshold


def _one_line(stderr):
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def test_a_worker_failure_is_named_by_its_cause_not_the_runners_wrapper(capsys):
    """Beam's multi-processing runner re-raises a worker's exception as a RuntimeError whose message is the
    worker's traceback: the line names the worker's exception."""
    options = PipelineOptions(['--direct_running_mode', 'multi_processing', '--direct_num_workers', '1'])
    with Command('demo') as command:
        with beam.Pipeline(runner=fn_runner.FnApiRunner(), options=options) as pipeline:
            _ = (pipeline | beam.Create(['prev/v1/train.tfrecord'])
                 | beam.Map(lambda path: checked_range(path, 0, 11, b'12345')))
    assert command.status == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith('demo: failed: TruncatedRead: prev/v1/train.tfrecord ends at 5, before byte 11 of a '
                           'record (details in '), line
    log = re.search(r'details in (\S+?)[;)]', line)[1]
    assert 'RuntimeError' in open(log).read()  # the wrapper is in the log, with the whole traceback
    os.remove(log)


SIGNALLED = """
import os, signal, sys
from imgrec.console.command import Command, run_command
from imgrec.console.supervisor import supervise

def main(argv):
    with Command('demo') as command:
        command.begin(verbose=False)
        os.write(2, b'held: std::bad_alloc\\n')  # as a C++ library writes to fd 2
        if argv[0] != 'exit':
            os.kill(os.getpid(), getattr(signal, argv[0]))
        return 0
    return command.status

supervise('demo')
run_command(main, sys.argv[1:])
"""


def _supervised(tmp_path, how):
    return subprocess.run(launcher.command([sys.executable, '-c', SIGNALLED, how], core_bytes=0), cwd=ROOT,
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(tmp_path)),
                          timeout=GIVE_UP_S)


@pytest.mark.parametrize('how, cause', [('SIGABRT', 'aborted (SIGABRT)'), ('SIGKILL', 'killed (SIGKILL')])
def test_a_process_killed_by_a_signal_ends_in_one_line_and_keeps_what_it_printed(tmp_path, how, cause):
    result = _supervised(tmp_path, how)
    assert result.returncode == 128 + getattr(signal, how)  # what the shell reports for that signal
    line = _one_line(result.stderr)
    assert line.startswith(f'demo: failed: the demo process was {cause}'), line
    log = line.rsplit('; what it printed is in ', 1)[1]
    assert os.path.dirname(log) == str(tmp_path) and open(log).read() == 'held: std::bad_alloc\n'


def test_a_supervised_process_that_exits_leaves_no_file(tmp_path):
    result = _supervised(tmp_path, 'exit')
    assert result.returncode == 0 and result.stderr == ''
    assert os.listdir(tmp_path) == []


def _build(images, output, *extra, **limits):
    """The build in a process of its own, under ``limits`` (see ``launcher.command``); its log files go to the
    folder above ``output``."""
    return subprocess.Popen(
        launcher.command([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', str(images), '--output',
                          str(output), '--image_size', '32', *extra], **limits),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, TMPDIR=os.path.dirname(output)))


def _worker(build):
    """A Beam worker process of the running ``build`` (its warm workers start as the build begins)."""
    while True:
        assert build.poll() is None, 'the build ended before a worker started'
        for process in psutil.Process(build.pid).children(recursive=True):
            try:
                command = ' '.join(process.cmdline())
            except psutil.NoSuchProcess:
                continue
            if 'warm_worker' in command or 'sdk_worker_main' in command:
                return process


def test_a_killed_worker_is_one_line_that_says_so(sample_images, tmp_path):
    build = _build(sample_images, tmp_path / 'out', '--direct_running_mode', 'multi_processing',
                   '--direct_num_workers', '2')
    try:
        _worker(build).send_signal(signal.SIGKILL)  # what the kernel's out-of-memory killer does
        _, stderr = build.communicate(timeout=GIVE_UP_S)
    finally:
        build.kill()
    assert build.returncode == 1
    line = _one_line(stderr)
    assert line.startswith('build-dataset: failed: a local Beam worker process was killed (SIGKILL'), line
    assert not (tmp_path / 'out' / layout.LATEST).exists()


def test_a_build_under_a_memory_limit_ends_in_one_line(sample_images, tmp_path):
    """Under `ulimit -v 500000` the build process cannot start its threads and aborts in C++ (status 134):
    its parent says so, in one line naming the file that holds what the process printed."""
    build = _build(sample_images, tmp_path / 'out', address_space_bytes=500_000 * 1024)  # ulimit -v 500000
    _, stderr = build.communicate(timeout=GIVE_UP_S)
    assert build.returncode != 0
    line = _one_line(stderr)
    assert line.startswith('build-dataset: failed: '), line
    named = re.search(r'(?:what it printed is in|details in|its output is in) (\S+?)[;)]?$', line)
    if named:  # the cause was logged: the file is there
        assert os.path.dirname(named[1]) == str(tmp_path) and os.path.getsize(named[1])
    assert not (tmp_path / 'out' / layout.LATEST).exists()


@pytest.fixture
def data(tmp_path):
    """A small published dataset of 32x32 images and 4 labels: 2 train shards of 12, 1 validation shard of 8."""
    fixtures.write_dataset(str(tmp_path / 'data'), {'train': (24, 2), 'validation': (8, 1)})
    return tmp_path / 'data'


def _claim(data, edit):
    path = data / 'v1' / layout.DATASET_JSON
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


def _train(data, model_dir):
    return subprocess.run([sys.executable, '-m', 'imgrec.training.train', '--data', str(data), '--epochs', '1',
                           '--batch_size', '4', '--model_dir', str(model_dir)],
                          capture_output=True, text=True, timeout=GIVE_UP_S, cwd=ROOT)


def _tensorflow_part(line):
    """What the line quotes of TensorFlow's own message: its words, not its wrapper's."""
    message = line.split('(TensorFlow: ', 1)[1]
    assert message.strip(' );') and 'Graph execution error' not in message and 'stack traces' not in message
    return message


def test_a_dataset_json_claiming_another_image_size_names_the_shard_and_tensorflows_message(data, tmp_path):
    _claim(data, lambda document: document['record_options'].update(image_size=[64, 64]))
    result = _train(data, tmp_path / 'model')
    assert result.returncode == 1
    line = _one_line(result.stderr)
    shard = layout.shard_file_name('train', 0, 2)
    assert f'{shard}: record 0 (byte offset 0) is a 32x32x3 image, but dataset.json says 64x64x3' in line, line
    assert '64,64,3' in _tensorflow_part(line)
    assert not (tmp_path / 'model' / 'export').exists()


def test_a_dataset_json_with_fewer_labels_names_the_shard_and_tensorflows_message(data, tmp_path):
    _claim(data, lambda document: document.update(labels=document['labels'][:2]))
    result = _train(data, tmp_path / 'model')
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert re.search(r'train-0000[01]-of-00002\.tfrecord: record \d+ \(byte offset \d+\) has label [23], but '
                     r'dataset\.json lists 2 labels', line), line
    _tensorflow_part(line)
    assert not (tmp_path / 'model' / 'export').exists()
