"""Every ``python`` block of README.md and docs/*.md runs against the installed wheel, outside the checkout.

The wheel is built and installed into a folder of its own (conftest's ``installed_wheel``); each block runs
in a ``python -S`` process whose path holds that folder and, after it, the venv's site-packages for the
dependencies, from a temporary folder: nothing of the checkout is importable, so an import that works
only in the checkout (``from training import load``) fails here. Blocks run in page order (README.md, then
docs/ by name, as ``test_docs_commands`` runs the shell blocks) in one folder, so a page may use what an
earlier block wrote.

What the blocks need is made first: ``data/demo/images`` (24 drawn images) and ``data/demo/arrays``, a
small dataset named ``my_shapes`` with TFRecord and ArrayRecord shards, built twice (so TFDS by name has
versions 1.0.0 and 1.0.1). Names the docs use for what a run decides are replaced (``PLACEHOLDERS``), and
``GIVEN`` binds the names a block takes from the text around it.

A block that cannot run here (it needs Google Cloud, a TPU) follows the line ``<!-- python: not run:
REASON -->``, REASON one of ``NOT_RUN``, whose pattern the block must match: no block is skipped silently.
"""
import json
import os
import re
import subprocess
import sys
import sysconfig

import pytest

from imgrec.contract import layout
from imgrec.samples.generate import write_images
from tests import test_docs_commands as docs
from tests.conftest import SMALL, build

ARRAYS = 'data/demo/arrays'
NOT_RUN_MARK = re.compile(r'^<!-- python: not run: (.+) -->$')
NOT_RUN = {  # reason -> what a block it marks must contain
    'needs Google Cloud Storage': r'gs://',
    'needs Dataflow': r'DataflowRunner',
    'needs a Cloud TPU': r'\btpu\b|TPU',
}


def _placeholders(version):
    """(docs' text, replacement) pairs, ``version`` the newest version of ``ARRAYS``."""
    return [("'OUT/<version>'", repr(f'{ARRAYS}/{version}')),  # docs/contract.md
            ("data_dir='OUT'", f'data_dir={ARRAYS!r}'),  # docs/versions.md
            (f"'{ARRAYS}/20261201T090000Z'", repr(f'{ARRAYS}/{version}')),  # docs/array-record.md
            ("leases.reading('OUT', 'v3')", f'leases.reading({ARRAYS!r}, {version!r})'),  # docs/publication.md
            ("'OUT/v3/train-*.tfrecord'", repr(f'{ARRAYS}/{version}/train-*.tfrecord'))]


GIVEN = '''
import json as _json
version_dir = {version_dir!r}  # docs/contract.md: a version folder, its dataset.json, and how to open a file
document = _json.load(open(version_dir + '/dataset.json'))
open_file = lambda path: open(path, 'rb')
'''

# First of every block: the imgrec it imports must be the installed wheel's.
CHECK = '''
import imgrec as _imgrec
assert _imgrec.__file__.startswith({target!r}), 'imgrec imported from ' + _imgrec.__file__
'''


def _python_blocks():
    """(page, fence line, text, reason not run or None) of every python block, in running order."""
    found = []
    for page in docs.PAGES:
        lines = page.read_text().splitlines()
        for language, text, _, line in docs._blocks(page):  # pylint: disable=protected-access
            if language != 'python':
                continue
            mark = NOT_RUN_MARK.match(lines[line - 2].strip()) if line >= 2 else None
            found.append((page, line, text, mark[1] if mark else None))
    return found


BLOCKS = _python_blocks()


def _name(block):
    page, line, _, _ = block
    return f'{page.relative_to(docs.REPO)}:{line}'


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """(folder the blocks run in, placeholders) with ``data/demo/images`` and ``ARRAYS`` made."""
    folder = tmp_path_factory.mktemp('user')
    images = folder / 'data' / 'demo' / 'images'
    write_images(str(images), 6, **SMALL)
    arrays = folder / ARRAYS
    options = ('--name', 'my_shapes', '--formats', 'tfrecord,array_record', '--splits', 'train=75,validation=25')
    build(str(images), arrays, *options)
    write_images(str(folder / 'more'), 1, seed=1, classes=('circle',), **SMALL)
    os.replace(folder / 'more' / 'circle' / 'circle_00000.jpg', images / 'circle' / 'one_more.jpg')
    build(str(images), arrays, *options)
    version = (arrays / layout.LATEST).read_text().strip()
    return folder, _placeholders(version)


def test_every_python_block_runs_or_names_a_known_reason_it_cannot():
    assert BLOCKS, 'no python block found in the docs'
    for page, line, text, reason in BLOCKS:
        if reason is not None:
            assert reason in NOT_RUN, f'{page.name}:{line}: unknown reason {reason!r}; known: {sorted(NOT_RUN)}'
            assert re.search(NOT_RUN[reason], text), f'{page.name}:{line}: marked {reason!r} but does not match'


@pytest.mark.parametrize('block', BLOCKS, ids=_name)
def test_python_block_runs_on_the_installed_wheel(block, workspace, installed_wheel):
    page, line, text, reason = block
    if reason is not None:
        pytest.skip(reason)
    folder, placeholders = workspace
    for shown, used in placeholders:
        text = text.replace(shown, used)
    version_dir = dict(placeholders)["'OUT/<version>'"].strip("'")
    code = CHECK.format(target=str(installed_wheel)) + GIVEN.format(version_dir=version_dir) + text
    paths = dict.fromkeys([str(installed_wheel), sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']])
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(paths), 'MPLBACKEND': 'Agg'}
    done = subprocess.run([sys.executable, '-S', '-c', code], cwd=str(folder), env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f'{_name(block)} failed:\n{done.stderr[-3000:]}'
