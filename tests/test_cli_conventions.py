"""The four commands share one command-line convention (imgrec.console.arguments): a misspelt or abbreviated
option is one line naming the closest option, boolean options are --NAME / --no_NAME switches (the older
spellings still work), the dataset is the positional DATASET (--data still works), and build-dataset's
--runner is checked before anything runs."""
import os
import subprocess
import sys

import pytest

from imgrec.console.arguments import Parser
from imgrec.console.errors import UserError
from imgrec.versions import verify
from imgrec.pipelines import launcher, options, python_api
from imgrec.training import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = {'build-dataset': 'imgrec.pipelines.build_dataset', 'train-model': 'imgrec.training.train',
           'verify-dataset': 'imgrec.versions.verify', 'dataset-report': 'imgrec.versions.report'}


def _run(prog, *args, **kwargs):
    return subprocess.run([sys.executable, '-m', MODULES[prog], *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, **kwargs)


def _one_line_error(result, prog, message):
    assert result.returncode == 2, result.stderr
    assert result.stderr == f'{prog}: error: {message}\n'
    assert result.stdout == ''


@pytest.fixture(scope='module')
def command_args(sample_images, tmp_path_factory):
    """What each command needs beside the option under test: an input, or a dataset folder (empty: each
    mistake must be refused before it is read)."""
    folder = tmp_path_factory.mktemp('conventions')
    return {'build-dataset': ['--input', sample_images, '--output', str(folder / 'out')],
            'train-model': [str(folder), '--model_dir', str(folder / 'model')],
            'verify-dataset': [str(folder)], 'dataset-report': [str(folder)]}


@pytest.mark.parametrize('prog, args, message', [
    ('build-dataset', ['--imag_size', '32'], 'unknown option --imag_size (did you mean --image_size?)'),
    ('train-model', ['--epoch', '1'], 'unknown option --epoch (did you mean --epochs?)'),
    ('verify-dataset', ['--verbos'], 'unknown option --verbos (did you mean --verbose?)'),
    ('dataset-report', ['--build_second', '3'], 'unknown option --build_second (did you mean --build_seconds?)'),
])
def test_a_misspelt_or_abbreviated_option_is_one_line_naming_the_closest(command_args, tmp_path, prog, args,
                                                                         message):
    _one_line_error(_run(prog, *command_args[prog], *args), prog, message)
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('prog, args, message', [
    ('build-dataset', ['--image', '32'], 'unknown option --image (did you mean --image_size?)'),
    ('verify-dataset', ['--sampl', '2'], 'unknown option --sampl (did you mean --sample?)'),
    ('dataset-report', ['--build', '3'], 'unknown option --build (did you mean --build_seconds?)'),
])
def test_abbreviations_are_refused_in_every_command(command_args, prog, args, message):
    _one_line_error(_run(prog, *command_args[prog], *args), prog, message)


def test_a_misspelt_required_option_is_named_rather_than_reported_missing(sample_images):
    _one_line_error(_run('build-dataset', '--inptu', sample_images, '--output', 'out'), 'build-dataset',
                    'unknown option --inptu (did you mean --input?)')
    _one_line_error(_run('train-model', '--dat', 'somewhere'), 'train-model',
                    'unknown option --dat (did you mean --data?)')


@pytest.mark.parametrize('prog, switches', [
    ('build-dataset', ['--full', '--verbose', '--stratify', '--progress']),
    ('train-model', ['--augment', '--cache', '--deterministic', '--quiet', '--verbose']),
    ('verify-dataset', ['--verbose']),
])
def test_every_switch_in_the_help_is_name_and_no_name(prog, switches):
    result = _run(prog, '--help')
    assert result.returncode == 0 and result.stderr == ''
    for switch in switches:
        assert f'  {switch}, --no_{switch[2:]}' in result.stdout, switch


def _parsed(prog, *args):
    """The parsed switches of a command line of ``prog``, through the command's own parser."""
    if prog == 'build-dataset':
        config, _ = options.parse_args(['--input', 'in', '--output', 'out', *args])
        return {'verbose': config.verbose, 'full': config.full}
    if prog == 'train-model':
        config = train.parse_config(['data', *args])
        return {'verbose': config.verbose, 'augment': config.augment}
    return {'verbose': verify._parser().parse_args(['data', *args]).verbose}  # pylint: disable=protected-access


@pytest.mark.parametrize('prog', ['build-dataset', 'train-model', 'verify-dataset'])
@pytest.mark.parametrize('args, verbose', [
    ([], False), (['--verbose'], True), (['--no_verbose'], False), (['--verbose', '--no_verbose'], False),
    (['--verbose', 'true'], True), (['--verbose', 'False'], False), (['--verbose=true'], True),
    (['--verbose=false'], False), (['--no-verbose'], False)])
def test_one_switch_style_with_the_older_spellings_still_taken(prog, args, verbose):
    assert _parsed(prog, *args)['verbose'] is verbose


def test_the_older_switch_spellings_of_train_model_and_build_dataset_still_work():
    assert _parsed('train-model', '--no-augment')['augment'] is False
    assert _parsed('train-model', '--no_augment')['augment'] is False
    assert _parsed('train-model')['augment'] is True
    assert _parsed('build-dataset', '--full', 'true')['full'] is True
    assert _parsed('build-dataset', '--full=False')['full'] is False
    for args, shown in ([], True), (['--no_progress'], False), (['--progress', 'off'], False), \
            (['--progress', 'on'], True), (['--progress=false'], False):
        assert options.parse_args(['--input', 'in', '--output', 'out', *args])[0].progress is shown, args
    config = options.config_from_keywords({'input': 'in', 'output': 'out', 'full': False, 'stratify': 'true'})
    assert (config.full, config.stratify) == (False, True)


def test_a_switch_given_a_value_other_than_true_or_false_is_one_line(command_args):
    _one_line_error(_run('verify-dataset', *command_args['verify-dataset'], '--verbose=maybe'), 'verify-dataset',
                    "argument --verbose: expected true or false, got 'maybe'")


@pytest.mark.parametrize('prog', ['train-model', 'verify-dataset', 'dataset-report'])
def test_the_dataset_is_positional_in_every_command_that_reads_one_and_data_still_works(prog, tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    message = f'no dataset found at {empty}'
    for args in ([empty], ['--data', empty], [empty, '--data', empty]):
        result = _run(prog, *args)
        assert result.returncode == 2 and result.stderr.startswith(f'{prog}: error: {message}'), (args, result.stderr)
        assert result.stderr.count('\n') == 1
    _one_line_error(_run(prog), prog, f'the dataset is required: {prog} DATASET ...')
    _one_line_error(_run(prog, empty, '--data', tmp_path), prog,
                    f'two datasets given: {empty} and --data {tmp_path}; give one')


def test_verify_reads_a_dataset_given_either_way(built_dataset):
    for args in ([built_dataset], ['--data', built_dataset]):
        result = _run('verify-dataset', *args)
        assert result.returncode == 0 and result.stdout.startswith('verify-dataset: OK: 60 records'), result.stderr


@pytest.mark.parametrize('runner, message', [
    ('FlinkRunner', '--runner FlinkRunner needs --job_endpoint HOST:PORT of a running job server'),
    ('spark', '--runner SparkRunner needs --job_endpoint HOST:PORT of a running job server'),
    ('PortableRunner', '--runner PortableRunner needs --job_endpoint HOST:PORT of a running job server'),
    ('PrismRunner', '--runner PrismRunner needs --job_endpoint HOST:PORT of a running job server'),
    ('Flinky', '--runner Flinky is not a Beam runner (did you mean FlinkRunner?); this build runs on '
               'DirectRunner or DataflowRunner'),
    ('nonsense', '--runner nonsense is not a Beam runner; this build runs on DirectRunner or DataflowRunner'),
])
def test_an_unknown_runner_or_one_that_would_download_its_job_server_is_refused_up_front(sample_images, tmp_path,
                                                                                          runner, message):
    result = _run('build-dataset', '--input', sample_images, '--output', tmp_path / 'out', '--runner', runner)
    assert result.returncode == 2 and result.stdout == ''
    [line] = result.stderr.splitlines()
    assert line.startswith(f'build-dataset: error: {message}')
    assert not (tmp_path / 'out').exists()


def test_a_job_server_runner_with_its_endpoint_passes_the_check():
    _, _, beam_options = launcher.parse(['--input', 'in', '--output', 'out', '--runner', 'flink',
                                              '--job_endpoint', 'localhost:8099'])
    assert beam_options.get_all_options()['runner'] == 'FlinkRunner'


def test_the_shared_parser_refuses_abbreviations_and_a_stray_argument():
    parser = Parser(prog='tool')
    parser.add_argument('--epochs', type=int, default=1)
    with pytest.raises(UserError, match=r'^unknown option --epo \(did you mean --epochs\?\)$'):
        parser.parse_args(['--epo', '3'])
    with pytest.raises(UserError, match="^unexpected argument 'stray'$"):
        parser.parse_args(['stray'])
    assert parser.parse_args(['--epochs', '-1']).epochs == -1  # a negative number is a value, not an option
