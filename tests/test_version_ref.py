"""One reader of a version (imgrec.contract.version_ref): its rules with fake I/O, then every tool's command line
on the same bad outputs, answering each mistake with the same one line; and --version names checked up
front."""
import importlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from imgrec.contract import layout, metadata, version_ref
from imgrec.pipelines import build_dataset
from tests.conftest import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGING = layout.staging_name('v1', '0123456789ab')
GOOD = json.dumps({'format_version': metadata.FORMAT_VERSION, 'labels': ['a']})


class FakeFiles:
    """A dict of path -> text standing in for a filesystem; a value of None is a folder."""

    def __init__(self, files):
        self.files = files

    def exists(self, path):
        return path in self.files

    def read_text(self, path):
        if path not in self.files:
            raise FileNotFoundError(2, 'No such file or directory', path)
        if self.files[path] is None:
            raise IsADirectoryError(21, 'Is a directory', path)
        return self.files[path]


def _resolve(files, path='out', version=None):
    fake = FakeFiles(files)
    return version_ref.resolve(path, fake.read_text, fake.exists, version)


def _refusal(files, path='out', version=None):
    with pytest.raises(version_ref.VersionError) as error:
        _resolve(files, path, version)
    return str(error.value)


# --- the rules, with fake I/O -------------------------------------------------------------------------

def test_latest_names_the_version_and_a_version_folder_names_itself():
    files = {'out/LATEST': 'v1\n', 'out/v1/dataset.json': GOOD, 'out/v2/dataset.json': GOOD}
    ref = _resolve(files)
    assert (ref.output, ref.name, ref.directory, ref.via_latest) == ('out', 'v1', 'out/v1', True)
    assert ref.document['labels'] == ['a']
    ref = _resolve(files, 'out/v2/')
    assert (ref.output, ref.name, ref.directory, ref.via_latest) == ('out', 'v2', 'out/v2', False)
    ref = _resolve(files, version='v2')
    assert (ref.name, ref.directory, ref.via_latest) == ('v2', 'out/v2', False)
    assert _resolve({'gs://b/o/LATEST': b'v1\n', 'gs://b/o/v1/dataset.json': GOOD.encode()}, 'gs://b/o').directory \
        == 'gs://b/o/v1'


@pytest.mark.parametrize('latest, message', [
    ('', 'out/LATEST is empty: it should name a published version'),
    (' \n\t\n', 'out/LATEST is empty: it should name a published version'),
    (STAGING, f"out/LATEST names {STAGING!r}, which is a staging name (the folder of a build that did not "
              f"publish it), not a version"),
    ('../x', r"out/LATEST names '../x', which is not a plain folder name (it may not be . or .. or hold / or \)"),
    ('..', r"out/LATEST names '..', which is not a plain folder name (it may not be . or .. or hold / or \)"),
    ('.', r"out/LATEST names '.', which is not a plain folder name (it may not be . or .. or hold / or \)"),
    ('x/v1', r"out/LATEST names 'x/v1', which is not a plain folder name (it may not be . or .. or hold / or \)"),
    ('..\\x', r"out/LATEST names '..\\x', which is not a plain folder name (it may not be . or .. or hold / or \)"),
    ('v1\nv2', "out/LATEST names 'v1\\nv2', which holds a line break or another control character"),
    ('v\x001', "out/LATEST names 'v\\x001', which holds a line break or another control character"),
    ('v\u20281', "out/LATEST names 'v\\u20281', which holds a line break or another control character"),
    ('LATEST', "out/LATEST names 'LATEST', which is the name of the LATEST file, not a version"),
    ('v9', "out/LATEST names version 'v9', which has no dataset.json"),
])
def test_a_bad_latest_is_refused_in_one_line_and_never_followed(latest, message):
    # Every name LATEST might hold leads to a good version, so only the rules can refuse it.
    files = {'out/LATEST': latest, 'out/v1/dataset.json': GOOD, 'x/dataset.json': GOOD, 'out/x/v1/dataset.json': GOOD,
             'out/../x/dataset.json': GOOD, 'out/./dataset.json': GOOD, 'out/../dataset.json': GOOD,
             f'out/{STAGING}/dataset.json': GOOD, 'out/LATEST/dataset.json': GOOD, 'out/..\\x/dataset.json': GOOD,
             'out/v1\nv2/dataset.json': GOOD, 'out/v\x001/dataset.json': GOOD, 'out/v\u20281/dataset.json': GOOD}
    assert _refusal(files) == message
    assert '\n' not in message


def test_latest_as_bytes_follows_the_same_rules():
    fake = FakeFiles({'out/LATEST': b'', 'out/v1/dataset.json': GOOD})
    with pytest.raises(version_ref.VersionError, match='out/LATEST is empty'):
        version_ref.resolve('out', fake.read_text, fake.exists)
    with pytest.raises(version_ref.VersionError, match='out/LATEST is not UTF-8 text'):
        version_ref.latest_name(b'\xff\xfe', 'out/LATEST')


def test_what_is_missing_or_unreadable_is_named():
    assert _refusal({}) == 'no dataset found at out: expected dataset.json or LATEST there'
    assert _refusal({'out/LATEST': None}) == 'out/LATEST is a folder, not a file'
    assert _refusal({'out/LATEST': 'v1', 'out/v1/dataset.json': None}) == 'out/v1/dataset.json is a folder, not a file'
    assert _refusal({'out/v1/dataset.json': GOOD}, version='v2') == \
        "dataset version 'v2' not found: out/v2/dataset.json does not exist"
    assert _refusal({'out/LATEST': 'v1', 'out/v1/dataset.json': '{"format'}).startswith(
        'out/v1/dataset.json is not a valid dataset.json: ')
    assert _refusal({'out/LATEST': 'v1', 'out/v1/dataset.json': '[1]'}) == \
        'out/v1/dataset.json is not a valid dataset.json: it holds no JSON object'


def test_a_named_version_and_a_version_folder_follow_the_name_rules_too():
    files = {f'out/{STAGING}/dataset.json': GOOD, 'x/dataset.json': GOOD}
    assert _refusal(files, version=STAGING) == (f'dataset version {STAGING!r} is a staging name (the folder of a '
                                                f'build that did not publish it), not a version')
    assert _refusal(files, version='../x').startswith("dataset version '../x' is not a plain folder name")
    assert _refusal(files, f'out/{STAGING}') == (f'out/{STAGING} is a staging folder (of a build that did not '
                                                 f'publish it), not a version')


@pytest.mark.parametrize('found', [None, 0, metadata.FORMAT_VERSION + 1, '1'])
def test_a_format_this_code_does_not_read_is_refused_and_says_what_to_do(found):
    document = json.dumps({'format_version': found} if found is not None else {'labels': []})
    with pytest.raises(version_ref.FormatVersionError) as error:
        _resolve({'out/LATEST': 'v1', 'out/v1/dataset.json': document})
    assert str(error.value) == (f'out/v1/dataset.json has format_version {found!r}, but this code reads '
                                f'1 and {metadata.FORMAT_VERSION} (use the release that wrote it, or rebuild with '
                                f'build-dataset --full)')


@pytest.mark.parametrize('name', ['', 'LATEST', 'latest', 'v2\n', 'v2\r', '\tv2', 'a/b', 'a\\b', '.', '..', STAGING])
def test_check_version_name_refuses_what_cannot_be_a_plain_version_folder(name):
    with pytest.raises(version_ref.VersionError, match=r"^--version '"):
        version_ref.check_version_name(name, '--version')


@pytest.mark.parametrize('name', ['v1', '20260101T000000Z', 'v1.2-rc_3', 'LATEST2', '.hidden', 'é'])
def test_check_version_name_accepts_plain_folder_names(name):
    version_ref.check_version_name(name)


# --- every tool on the same bad outputs, through its real command line -------------------------------

PREFIXES = {'build': 'build-dataset: ', 'verify': 'verify-dataset: ', 'report': 'dataset-report: ',
            'train': 'train-model: '}
CASES = ('empty', 'staging', 'outside', 'missing', 'format')


@pytest.fixture(scope='module')
def bad_outputs(built_dataset, tmp_path_factory):
    """{case: output folder}: each holds a good published v1, and a LATEST (or v1) that is wrong."""
    good = os.path.join(built_dataset, 'v1')
    root = tmp_path_factory.mktemp('bad')
    outputs = {}
    for case in CASES:
        output = root / case / 'out'
        shutil.copytree(good, output / 'v1')
        outputs[case] = output
    (outputs['empty'] / layout.LATEST).write_text('\n')
    shutil.copytree(good, outputs['staging'] / STAGING)
    (outputs['staging'] / layout.LATEST).write_text(f'{STAGING}\n')
    shutil.copytree(good, root / 'outside' / 'x')  # a good version LATEST points at: never to be followed
    (outputs['outside'] / layout.LATEST).write_text('../x\n')
    (outputs['missing'] / layout.LATEST).write_text('v9\n')
    document = json.loads((outputs['format'] / 'v1' / layout.DATASET_JSON).read_text())
    document['format_version'] = metadata.FORMAT_VERSION + 1
    (outputs['format'] / 'v1' / layout.DATASET_JSON).write_text(metadata.dumps(document))
    (outputs['format'] / layout.LATEST).write_text('v1\n')
    return outputs


def _command(tool, output, sample_images, model_dir):
    if tool == 'build':
        return ['imgrec.pipelines.build_dataset', '--input', sample_images, '--output', output, '--image_size', '32',
                '--direct_running_mode', 'in_memory', '--version', 'v2']
    if tool == 'verify':
        return ['imgrec.versions.verify', output]
    if tool == 'report':
        return ['imgrec.versions.report.command', output]
    return ['imgrec.training.train', '--data', output, '--epochs', '1', '--model_dir', model_dir]


def _tree(folder):
    return sorted((os.path.relpath(os.path.join(d, n), folder), os.path.getsize(os.path.join(d, n)))
                  for d, _, names in os.walk(folder) for n in names)


# The case whose tools run as the user runs them, each a process of its own; the other cases call each
# tool's main() here, the same code below the console script (a process each costs seconds of imports).
IN_PROCESSES = 'missing'


def _main_of(module):
    """The ``main(argv)`` of a tool's module (imported late: TensorFlow for train-model only)."""
    return importlib.import_module(module).main


def _tool_refusal(tool, output, sample_images, model_dir, in_process, capsys):
    """(exit status, stderr) of one tool on ``output``."""
    module, *argv = map(str, _command(tool, output, sample_images, model_dir))
    if in_process:
        capsys.readouterr()
        status = _main_of(module)(argv)
        return status, capsys.readouterr().err
    result = subprocess.run([sys.executable, '-m', module, *argv], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    return result.returncode, result.stderr


@pytest.mark.parametrize('case', CASES)
def test_every_tool_refuses_the_same_bad_output_with_the_same_line(case, bad_outputs, sample_images, tmp_path,
                                                                   capsys):
    output = bad_outputs[case]
    before = _tree(output.parent)
    messages = {}
    for tool, prefix in PREFIXES.items():
        status, err = _tool_refusal(tool, output, sample_images, tmp_path / 'model', case != IN_PROCESSES, capsys)
        # Only the command's own lines: a library (TensorFlow, absl) may print its own.
        own = [line for line in err.splitlines() if line.startswith(prefix)]
        assert status == 2 and len(own) == 1, (tool, status, err)
        assert own[0].startswith(f'{prefix}error: ') and 'Traceback' not in err, (tool, err)
        messages[tool] = own[0][len(f'{prefix}error: '):]
    assert len(set(messages.values())) == 1, messages
    message = messages['build']
    expected_start = {'empty': f'{output}/LATEST is empty', 'staging': f'{output}/LATEST names {STAGING!r}',
                      'outside': f"{output}/LATEST names '../x', which is not a plain folder name",
                      'missing': f"{output}/LATEST names version 'v9', which has no dataset.json",
                      'format': f'{output}/v1/dataset.json has format_version {metadata.FORMAT_VERSION + 1}'}
    assert message.startswith(expected_start[case]), message
    assert _tree(output.parent) == before  # nothing written: no version, no report, no staging folder
    assert not (tmp_path / 'model').exists()


def test_full_builds_over_a_version_of_another_format(bad_outputs, sample_images, tmp_path, capsys):
    """The one mistake --full gets past: the previous version's format is not needed by a full build."""
    output = tmp_path / 'out'
    shutil.copytree(bad_outputs['format'], output)
    build(sample_images, output, '--version', 'v2', '--full')
    assert (output / layout.LATEST).read_text() == 'v2\n'
    ref = version_ref.resolve(str(output), lambda path: open(path, 'rb').read(), os.path.exists)
    assert ref.name == 'v2' and ref.document['refresh']['mode'] == 'full'
    assert ref.document['refresh']['previous'] == 'v1' and '--full was given' in ref.document['refresh']['full_reason']


# --- --version names, checked up front ------------------------------------------------------------------

@pytest.mark.parametrize('name, why', [
    ('LATEST', 'is the name of the LATEST file, not a version'),
    ('v2\n', 'holds a line break or another control character'),
    ('a/b', 'is not a plain folder name'),
    ('..', 'is not a plain folder name'),
    (STAGING, 'is a staging name'),
    ('', 'is empty'),
    ('a b', None),
])
def test_bad_version_names_are_refused_up_front_and_nothing_is_written(name, why, sample_images, tmp_path, capsys):
    output = tmp_path / 'out'
    status = build_dataset.main(['--input', sample_images, '--output', str(output), '--image_size', '32',
                                 '--direct_running_mode', 'in_memory', '--version', name])
    err = capsys.readouterr().err
    assert status == 2 and err.count('\n') == 1, err
    expected = f'build-dataset: error: --version {name!r} {why}' if why else \
        f"build-dataset: error: --version may hold letters, digits, _, . and - only, and start with a letter or " \
        f"digit, got {name!r}"
    assert err.startswith(expected), err
    assert not tmp_path.joinpath('out').exists() and not os.path.exists(tmp_path / 'LATEST')
