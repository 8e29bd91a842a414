"""User mistakes end with one line naming the problem and a non-zero exit, never a traceback."""
import json
import os
import re
import subprocess
import sys

import pytest

from imgrec.contract import layout
from imgrec.console.errors import UserError
from imgrec.storage import retries
from imgrec.pipelines import beam_names, build_dataset, launcher, options, preflight
from tests.contract_checks import check_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    """Another build (here another --image_size) may not take a published --version; the same command run
    again (its other settings carried over from v1) is a rerun of the build that published it."""
    status, err = run_main('--input', sample_images, '--output', built_dataset, '--version', 'v1',
                           '--image_size', '48')
    assert status == 2 and 'version v1 already exists' in err
    assert run_main('--input', sample_images, '--output', built_dataset, '--version', 'v1', '--progress', 'off',
                    '--image_size', '32') == (0, '')


def test_a_build_that_writes_nothing_fails_without_publishing(run_main, tmp_path):
    (tmp_path / 'images' / 'cat').mkdir(parents=True)
    (tmp_path / 'images' / 'cat' / 'page.jpg').write_text('<html>not found</html>')
    status, err = run_main('--input', tmp_path / 'images', '--output', tmp_path / 'out')
    assert status == 1 and err.startswith('build-dataset: failed: ') and '\n' not in err
    assert not (tmp_path / 'out' / layout.LATEST).exists()


def test_the_command_line_exits_non_zero_without_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', str(tmp_path),
                             '--output', str(tmp_path / 'out'), '--image_size', '0'],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == 'build-dataset: error: --image_size must be at least 1x1, got \'0\''


def test_help_shows_every_default_beams_common_options_and_two_examples():
    result = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--help'], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0 and not result.stderr
    text = result.stdout
    listed = text[text.index('\noptions:'):]
    for action in options._parser().actions:  # pylint: disable=protected-access
        if action.option_strings[0] in ('-h', '--input', '--manifest', '--output'):
            continue
        entry = listed[re.search('  ' + action.option_strings[0] + '[ ,]', listed).start():]
        entry = entry[:entry.index('\n  --')] if '\n  --' in entry else entry
        assert '(default: ' in ' '.join(entry.split()), action.option_strings[0]
    for beam_option in ('--runner', '--direct_num_workers', '--project', '--region', '--temp_location'):
        assert beam_option in text.split('Every other option goes to Apache Beam')[1]
    examples = text.split('examples:')[1]
    assert examples.count('build-dataset --input') == 2 and '--runner DataflowRunner' in examples


@pytest.mark.parametrize('args, message', [
    (['--imag_size', '32'], 'unknown option --imag_size (did you mean --image_size?)'),
    (['--direct_running_mode', 'multiprocessing'], "argument --direct_running_mode: invalid choice: 'multiprocessing'"),
    (['--direct_num_workers', 'abc'], "argument --direct_num_workers: invalid int value: 'abc'"),
    (['--runner'], 'argument --runner: expected one argument'),
    (['stray'], "unexpected argument 'stray'"),
    (['--num_shards', 'train=99999'], '--num_shards allows at most 10000 shards a split: train'),
    (['--image_size', '99999'], "--image_size must be at most 8192 a side, got '99999'"),
    (['--retry_deadline', '-1'], '--retry_deadline must be a positive number of seconds'),
    (['--keep_versions', '0'], '--keep_versions must be at least 1'),
    (['--full=maybe'], "argument --full: expected true or false, got 'maybe'"),
])
def test_wrong_options_are_one_line_before_anything_runs(sample_images, tmp_path, args, message):
    result = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', sample_images,
                             '--output', str(tmp_path / 'out'), *args], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.count('\n') == 1 and result.stderr.startswith('build-dataset: error: ')
    assert message in result.stderr
    assert not (tmp_path / 'out').exists()


# Runs the command as its console script does, then says whether Beam (or TensorFlow, or Google's storage client)
# was ever imported.
_BEFORE_BEAM = """
import json, sys
from imgrec.pipelines import build_dataset
try:
    status = build_dataset.main(sys.argv[1:])
except SystemExit as exit_:
    status = exit_.code
print(json.dumps({'status': status, 'loaded': [m for m in ('apache_beam', 'tensorflow', 'google.cloud.storage')
                                           if m in sys.modules]}),
      file=sys.stderr)
"""


@pytest.mark.parametrize('args, status, message', [
    (['--help'], 0, None),
    (['--input', 'in', '--output', 'out', '--imag_size', '32'], 2, 'unknown option --imag_size (did you mean --image_size?)'),
    (['--input', 'in', '--output', 'out', '--direct_num_worker', '2'], 2,
     'unknown option --direct_num_worker (did you mean --direct_num_workers?)'),
    (['--input', 'in', '--output', 'out', '--image_size', '0'], 2, "--image_size must be at least 1x1, got '0'"),
    (['--input', 'in', '--output', 'out', '--runner', 'Flinky'], 2, '--runner Flinky is not a Beam runner'),
    (['--input', 'in', '--output', 'out', 'stray'], 2, "unexpected argument 'stray'"),
    (['--input', 'in', '--output', '/'], 2, '--output must name a folder or gs:// prefix below the root'),
])
def test_help_and_mistakes_in_the_options_are_answered_before_beam_is_imported(tmp_path, args, status, message):
    result = subprocess.run([sys.executable, '-c', _BEFORE_BEAM, *args], capture_output=True, text=True, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    *lines, last = result.stderr.splitlines()
    assert json.loads(last) == {'status': status, 'loaded': []}
    if message is None:
        assert 'usage: build-dataset' in result.stdout and not lines
    else:
        assert len(lines) == 1 and lines[0].startswith(f'build-dataset: error: {message}')


# ``python -m imgrec.pipelines.build_dataset``, run as Python runs it, with an audit hook naming each heavy module
# as its import begins (the command ends the process itself, so nothing can look at sys.modules after it).
_MODULE_FORM = """
import runpy, sys
HEAVY = ('apache_beam', 'tensorflow', 'google.cloud.storage')
def hook(event, args):
    if event == 'import' and args[0] in HEAVY:
        print(f'imported {args[0]}', file=sys.stderr)
sys.addaudithook(hook)
sys.argv = ['build_dataset', *sys.argv[1:]]
runpy.run_module('imgrec.pipelines.build_dataset', run_name='__main__', alter_sys=True)
"""


@pytest.mark.parametrize('args, status, message', [
    (['--help'], 0, None),
    (['--input', 'in', '--output', 'out', '--imag_size', '32'], 2, 'unknown option --imag_size (did you mean --image_size?)'),
])
def test_the_module_form_answers_before_beam_is_imported_too(tmp_path, args, status, message):
    result = subprocess.run([sys.executable, '-c', _MODULE_FORM, *args], capture_output=True, text=True, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == status
    assert not [line for line in result.stderr.splitlines() if line.startswith('imported ')], result.stderr
    if message is None:
        assert 'usage: build-dataset' in result.stdout
    else:
        assert result.stderr.splitlines() == [f'build-dataset: error: {message}']


def test_beams_own_options_are_taken_before_beam_is_imported_and_their_values_checked_after():
    config, beam_args = options.parse_args(['--input', 'in', '--output', 'out', '--runner', 'direct',
                                            '--direct_num_workers', '2', '--experiments=a', '--no_save_main_session'])
    assert beam_args == ['--runner', 'direct', '--direct_num_workers', '2', '--experiments=a', '--no_save_main_session']
    with pytest.raises(UserError, match=r"^argument --direct_num_workers: invalid int value: 'x'$"):
        launcher.parse(['--input', 'in', '--output', 'out', '--direct_num_workers', 'x'])


def test_the_beam_option_names_kept_are_the_installed_beams():
    version, names, runners = beam_names.from_beam()
    refresh = (f'Beam {version} is installed: set BEAM_VERSION, OPTIONS and RUNNERS in pipelines/beam_names.py to '
               f'beam_names.from_beam()')
    assert version == beam_names.BEAM_VERSION, refresh
    assert names == beam_names.OPTIONS, (refresh, sorted(names ^ beam_names.OPTIONS))
    assert runners == beam_names.RUNNERS, refresh
    assert {'--runner', '--direct_num_workers', '--experiment', '--experiments', '--pubsub_root_url'} <= names


def test_the_retry_deadline_help_states_the_storage_layers_default():
    assert options.RETRY_DEADLINE_HELP == retries.DEFAULT_DEADLINE_S
    config, _ = options.parse_args(['--input', 'in', '--output', 'out'])
    assert config.retry_policy().deadline_s == retries.DEFAULT_DEADLINE_S


@pytest.mark.parametrize('output', ['', '/', './/'])
def test_an_empty_or_root_output_is_refused(run_main, sample_images, output, monkeypatch):
    monkeypatch.chdir('/')
    status, err = run_main('--input', sample_images, '--output', output)
    assert status == 2 and '--output must name a folder or gs:// prefix below the root' in err and '\n' not in err


def test_an_output_that_is_a_file_is_refused(run_main, sample_images, tmp_path):
    (tmp_path / 'file').write_text('x')
    for output in (tmp_path / 'file', tmp_path / 'file' / 'below'):
        status, err = run_main('--input', sample_images, '--output', output)
        assert status == 2 and err == f'build-dataset: error: --output {output} is not a folder (a file is in the way)'


def _mount_tmpfs(path, options):
    path.mkdir()
    result = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(path)], capture_output=True)
    if result.returncode:
        pytest.skip(f'cannot mount a tmpfs here ({result.stderr.decode().strip() or result.returncode})')


@pytest.fixture()
def mounts():
    mounted = []
    yield mounted
    for path in mounted:
        subprocess.run(['umount', str(path)], check=False)


def test_a_read_only_output_is_refused_before_decoding(run_main, sample_images, tmp_path, mounts):
    _mount_tmpfs(tmp_path / 'ro', 'ro,size=1m')
    mounts.append(tmp_path / 'ro')
    status, err = run_main('--input', sample_images, '--output', tmp_path / 'ro' / 'out')
    assert status == 2 and err.startswith('build-dataset: error: cannot write to --output') and '\n' not in err
    assert 'Read-only file system' in err


def test_a_nearly_full_disk_is_refused_before_decoding(run_main, sample_images, tmp_path, mounts):
    _mount_tmpfs(tmp_path / 'small', 'size=1m')
    mounts.append(tmp_path / 'small')
    status, err = run_main('--input', sample_images, '--output', tmp_path / 'small' / 'out')
    assert status == 2 and err.startswith('build-dataset: error: the disk of --output') and 'nearly full' in err


def test_a_disk_that_fills_up_fails_in_one_line_naming_the_file_and_keeps_latest(
        run_main, sample_images, tmp_path, mounts, monkeypatch):
    disk = tmp_path / 'disk'
    _mount_tmpfs(disk, 'size=1m')  # room for the start of the spill files, not for the shards too
    mounts.append(disk)
    monkeypatch.setattr(preflight, 'MIN_FREE_BYTES', 0)  # past the pre-flight floor: the disk fills up later
    (disk / 'out' / 'v0').mkdir(parents=True)  # a published version (without a record index: a full build)
    (disk / 'out' / 'v0' / 'dataset.json').write_text('{"format_version": 1, "version": "v0", "labels": []}')
    (disk / 'out' / 'LATEST').write_text('v0\n')
    status, err = run_main('--input', sample_images, '--output', disk / 'out', '--version', 'v1',
                           '--image_size', '256')
    assert status == 1 and '\n' not in err, err
    assert err.startswith('build-dataset: failed: ') and 'No space left on device' in err and str(disk) in err
    if 'details in ' in err:  # an unexpected place: the traceback is in the log file the line names
        assert os.path.exists(err.split('details in ')[1].split(';')[0])
    assert (disk / 'out' / 'LATEST').read_text() == 'v0\n' and not (disk / 'out' / 'v1').exists()


def test_an_unpublished_folder_of_the_same_version_is_replaced_not_mixed(run_main, sample_images, tmp_path):
    stale = tmp_path / 'out' / 'v1'
    stale.mkdir(parents=True)
    (stale / 'train-00000-of-00016.tfrecord').write_bytes(b'stale shard of an older, failed build')
    status, err = run_main('--input', sample_images, '--output', tmp_path / 'out', '--version', 'v1')
    assert status == 0, err
    assert not (stale / 'train-00000-of-00016.tfrecord').exists()
    check_version(str(tmp_path / 'out'))


def test_each_input_mistake_has_its_own_line(run_main, tmp_path):
    """An empty folder, a file given as --input, a folder of loose files and class folders with no image:
    four mistakes, four lines (issue 37), each exit status 2."""
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'photo.jpg').write_bytes(b'\xff\xd8 not really')
    (tmp_path / 'loose').mkdir()
    (tmp_path / 'loose' / 'a.jpg').write_bytes(b'\xff\xd8 loose')
    (tmp_path / 'loose' / 'notes.txt').write_text('hi')
    (tmp_path / 'classes' / 'cat').mkdir(parents=True)
    (tmp_path / 'classes' / 'cat' / 'notes.txt').write_text('no images here')
    expected = {'empty': 'input folder {} is empty: put one folder of images a class in it',
                'photo.jpg': '--input {} is a file, not a folder',
                'loose': 'input folder {} has no class folders (1 image(s) and 1 other file(s) at its top)',
                'classes': 'no images found under {}'}
    lines = set()
    for name, message in expected.items():
        given = str(tmp_path / name)
        status, err = run_main('--input', given, '--output', tmp_path / 'out')
        assert status == 2 and '\n' not in err and message.format(given) in err, (name, err)
        lines.add(err.replace(given, 'INPUT'))
    assert len(lines) == len(expected)
    assert not (tmp_path / 'out' / layout.LATEST).exists()
