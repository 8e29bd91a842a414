"""mypy follows ``imgrec.*`` across modules: a wrong call to another module's function fails ``make test``.

The tree is copied (the directory links as links) and a wrong cross-module call planted in the copy; mypy,
run as ``make test`` runs it (mypy.ini), must name it. The same copy unplanted passes, so the failure is
the planted call's.
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = ('imgrec', 'pipelines', 'transforms', 'training')
PLANTED = '''

def _planted_wrong_call():
    from imgrec.pipelines.options import parse_args
    parse_args(42, "x", "too many")
'''


def _mypy(folder):
    return subprocess.run([sys.executable, '-m', 'mypy', '--cache-dir', os.devnull], cwd=folder,
                          capture_output=True, text=True)


def test_a_wrong_call_across_modules_fails_the_type_check(tmp_path):
    for name in TREE:
        shutil.copytree(os.path.join(ROOT, name), tmp_path / name, symlinks=True,
                        ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(os.path.join(ROOT, 'mypy.ini'), tmp_path)
    clean = _mypy(tmp_path)
    assert clean.returncode == 0, clean.stdout
    with open(tmp_path / 'pipelines' / 'build_dataset.py', 'a', encoding='utf-8') as stream:
        stream.write(PLANTED)
    planted = _mypy(tmp_path)
    assert planted.returncode != 0
    errors = [line for line in planted.stdout.splitlines() if ': error:' in line]
    assert errors and all(line.startswith('imgrec/pipelines/build_dataset.py:') for line in errors), planted.stdout
    assert any('Too many arguments for "parse_args"' in line for line in errors)
    assert any('Argument 1 to "parse_args" has incompatible type "int"' in line for line in errors)
