"""train-model's command line: help and argument errors before TensorFlow, defaults in the help, progress lines."""
import io
import json
import subprocess
import sys

import pytest

from tests import training_fixtures as fixtures
from imgrec.training import epoch_progress, train

BAD_ARGUMENTS = [
    (['--learning_rate', '-1'], 'argument --learning_rate: must be a positive finite number, got -1'),
    (['--learning_rate', '0'], 'argument --learning_rate: must be a positive finite number, got 0'),
    (['--learning_rate', 'nan'], 'argument --learning_rate: must be a positive finite number, got nan'),
    (['--learning_rate', 'inf'], 'argument --learning_rate: must be a positive finite number, got inf'),
    (['--checkpoint_steps', '-5'], 'argument --checkpoint_steps: must be at least 1, got -5'),
    (['--checkpoint_steps', '0'], 'argument --checkpoint_steps: must be at least 1, got 0'),
    (['--steps_per_execution', 'x'], "argument --steps_per_execution: must be a whole number, got 'x'"),
    (['--profile_steps', '0'], 'argument --profile_steps: must be at least 1, got 0'),
    (['--progress_seconds', '-1'], 'argument --progress_seconds: must be a positive finite number, got -1'),
    (['--no_such_option'], 'unknown option --no_such_option'),
    (['--epoch', '1'], 'unknown option --epoch (did you mean --epochs?)'),
]


def test_help_and_argument_errors_come_before_tensorflow_is_imported(tmp_path):
    """One subprocess runs --help and every bad argument; it reports what it printed and what it imported."""
    code = '\n'.join([
        'import contextlib, io, json, sys',
        'from imgrec.training import train',
        'help_text = io.StringIO()',
        'with contextlib.redirect_stdout(help_text):',
        '    try:',
        "        train.main(['--help'])",
        '    except SystemExit as exit:',
        '        help_status = exit.code',
        'errors = []',
        f'for argv in {[argv for argv, _ in BAD_ARGUMENTS]!r}:',
        '    stderr = io.StringIO()',
        '    with contextlib.redirect_stderr(stderr):',
        f"        status = train.main(['--data', {str(tmp_path)!r}, *argv])",
        '    errors.append([status, stderr.getvalue()])',
        "heavy = sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules)",
        "print(json.dumps({'help_status': help_status, 'help': help_text.getvalue(), 'errors': errors, "
        "'heavy': heavy}))",
    ])
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120,
                            cwd=fixtures.REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ''
    report = json.loads(result.stdout)
    assert report['heavy'] == [], 'parsing arguments imported TensorFlow'
    assert report['help_status'] == 0 and 'usage: train-model' in report['help']
    for (argv, message), (status, stderr) in zip(BAD_ARGUMENTS, report['errors']):
        assert status == 2, argv
        assert stderr == f'train-model: error: {message}\n', argv


def _help_entries(text):
    """{option: its help text} from --help output: an entry starts with '  -', continuation lines are deeper."""
    entries, current = {}, None
    for line in text.splitlines():
        if line.startswith(('  -', '  DATASET')):
            current = line.split()[0].rstrip(',')
            entries[current] = line
        elif current and line.startswith('    '):
            entries[current] += ' ' + line.strip()
        else:
            current = None
    return entries


def test_every_option_in_the_help_shows_its_default(capsys):
    with pytest.raises(SystemExit):
        train.main(['--help'])
    entries = _help_entries(capsys.readouterr().out)
    assert {'DATASET', '--learning_rate', '--epochs', '--shuffle_buffer', '--train_split', '--quiet'} <= set(entries)
    no_default = {'-h', 'DATASET'}  # help itself, and the one required argument
    missing = [option for option, text in entries.items() if option not in no_default and 'default' not in text]
    assert missing == []
    assert '(default: 0.001 for resnet50, 0.003 otherwise)' in entries['--learning_rate']
    assert '(default: 10)' in entries['--epochs']
    assert '(default: train)' in entries['--train_split']


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    output = tmp_path_factory.mktemp('data')
    fixtures.write_dataset(str(output), {'train': (48, 2), 'validation': (8, 1)})
    return str(output)


def _run(data, model_dir, *argv):
    result = subprocess.run([sys.executable, '-m', 'imgrec.training.train', '--data', data, '--epochs', '2', '--batch_size',
                             '4', '--model_dir', str(model_dir), *argv],
                            capture_output=True, text=True, timeout=300, cwd=fixtures.REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == '', 'TensorFlow log lines reached the user'
    return result.stdout.splitlines()


@pytest.fixture(scope='module')
def progress_runs(data, tmp_path_factory):
    """The two runs with progress lines every 0.001 s, as a user starts them: {'progress'|'quiet': (stdout lines,
    model folder)}. Each costs a TensorFlow start and a training; the resume test below reuses the first's
    model folder (pinned to version v1) rather than training a third time."""
    folder = tmp_path_factory.mktemp('progress_runs')
    return {name: (_run(data, folder / name, '--progress_seconds', '0.001', *extra), folder / name)
            for name, extra in (('progress', ()), ('quiet', ('--quiet',)))}


def test_progress_lines_come_between_the_epoch_lines_and_quiet_leaves_only_those(progress_runs):
    lines, _ = progress_runs['progress']
    epoch_lines = [i for i, line in enumerate(lines) if line.startswith('epoch ')]
    assert len(epoch_lines) == 2
    for epoch, end in enumerate(epoch_lines, 1):
        begin = epoch_lines[epoch - 2] + 1 if epoch > 1 else 0
        steps = [line for line in lines[begin:end] if line.lstrip().startswith('step ')]
        assert steps, f'no progress line during epoch {epoch}'
        for line in steps:
            assert f'of epoch {epoch}/2: ' in line and ' images/s, running loss ' in line
    assert any(line.startswith('exported SavedModel to ') and line.endswith(' s') for line in lines)

    quiet, _ = progress_runs['quiet']
    assert [line.split(':')[0] for line in quiet] == ['epoch 1/2', 'epoch 2/2']


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_rewrites_one_line_on_a_terminal_and_waits_out_its_interval():
    terminal, clock = _Terminal(), _Clock()
    shown = epoch_progress.Progress(10, terminal, clock)
    shown.start_epoch(0, 3, 100)
    clock.now = 5
    shown.update(10, 40, 1.5)
    assert terminal.getvalue() == '', 'a line before the interval passed'
    clock.now = 10
    shown.update(20, 80, 1.25)
    clock.now = 20
    shown.update(40, 160, 1.0)
    shown.finish()
    assert terminal.getvalue() == ('\r\x1b[K  step 20/100 of epoch 1/3: 8 images/s, running loss 1.2500'
                                   '\r\x1b[K  step 40/100 of epoch 1/3: 8 images/s, running loss 1.0000'
                                   '\r\x1b[K')
    assert '\n' not in terminal.getvalue()


def test_a_model_folder_that_cannot_be_written_is_one_line_naming_it_and_the_cause(data, tmp_path):
    """The storage layer names the file it could not write and why (a file stands where the folder goes)."""
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a folder')
    argv = [sys.executable, '-m', 'imgrec.training.train', '--data', data, '--epochs', '1', '--batch_size', '4',
            '--model_dir', str(blocker / 'model')]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=fixtures.REPO_ROOT)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f'train-model: failed: cannot write {blocker}') and 'NotADirectoryError' in line


def test_a_resume_on_another_dataset_names_the_pinned_version_and_how_to_start_afresh(data, progress_runs, tmp_path):
    """The model folder pins the version its run trained on: another dataset, or another --version, is refused
    in one line saying so."""
    _, model_dir = progress_runs['progress']  # trained on version v1 (exit 0, nothing on stderr), pinned in run.json
    assert json.loads((model_dir / 'run.json').read_text())['dataset_version'] == 'v1'
    other = tmp_path / 'other'
    fixtures.write_dataset(str(other), {'train': (16, 1), 'validation': (8, 1)}, version='v9')
    base = [sys.executable, '-m', 'imgrec.training.train', '--epochs', '2', '--batch_size', '4', '--model_dir', str(model_dir)]
    result = subprocess.run([*base, str(other)], capture_output=True, text=True, timeout=120, cwd=fixtures.REPO_ROOT)
    assert result.returncode == 2 and result.stdout == ''
    assert result.stderr == (f"train-model: error: --model_dir {model_dir} holds a run trained on dataset version "
                             f"'v1', which {other} does not hold (its version is 'v9'): resume with the dataset "
                             f"folder that holds it, or start afresh with a new --model_dir (or delete {model_dir})\n")
    result = subprocess.run([*base, data, '--version', 'v9'], capture_output=True, text=True, timeout=120,
                            cwd=fixtures.REPO_ROOT)
    assert result.returncode == 2
    assert result.stderr == (f"train-model: error: --model_dir {model_dir} holds a run trained on dataset version "
                             f"'v1', not --version v9: resume without --version, or start afresh with a new "
                             f"--model_dir (or delete {model_dir})\n")
    result = subprocess.run([*base, str(tmp_path / 'missing')], capture_output=True, text=True, timeout=120,
                            cwd=fixtures.REPO_ROOT)
    assert result.returncode == 2
    assert result.stderr == (f"train-model: error: no dataset found at {tmp_path / 'missing'}: "
                             f"expected dataset.json or LATEST there\n")


def test_a_single_class_dataset_is_refused_in_one_line_unless_allowed(tmp_path, capsys):
    """A model trained on one class is right every time and learns nothing: refused before TensorFlow starts."""
    data = str(tmp_path / 'one_class')
    fixtures.write_dataset(data, {'train': (8, 1), 'validation': (4, 1)}, labels=('circle',))
    argv = ['--data', data, '--model_dir', str(tmp_path / 'model')]
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith('train-model: error: ')
    assert "split 'train'" in err and "only class 'circle'" in err and '--allow_single_class' in err
    config = train.parse_config([*argv, '--allow_single_class'])
    assert config.allow_single_class and train.check_data(config).labels == ['circle']
