"""Installed names cannot collide: everything installs under the one import root, ``imgrec``.

The wheel is built from this checkout and installed into a folder of its own (conftest's ``wheel`` and
``installed_wheel``), then imported from a process that sees only that folder, as a user's environment would.
"""
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON_WORDS = ('contract', 'pipelines', 'transforms', 'training', 'samples')


def _top_level(wheel_path):
    with zipfile.ZipFile(wheel_path) as archive:
        return {name.split('/')[0] for name in archive.namelist() if not name.split('/')[0].endswith('.dist-info')}


def test_the_wheel_installs_one_root_and_nothing_under_a_common_word(wheel):
    top = _top_level(wheel)
    assert top == {'imgrec'}


def test_console_scripts_point_inside_the_namespace(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith('entry_points.txt')]
        scripts = archive.read(entry_points).decode().split('[console_scripts]')[1]
    targets = [line.split('=', 1)[1].strip() for line in scripts.splitlines() if '=' in line]
    assert targets and all(t.startswith('imgrec.') for t in targets)


def test_installed_the_common_words_are_free_for_the_users_own_modules(installed_wheel, tmp_path):
    target = installed_wheel
    probe = ('import importlib.util, imgrec.contract.layout as layout; print(layout.__file__); '
             f'print(*[importlib.util.find_spec(name) is None for name in {COMMON_WORDS!r}])')
    # -S: no site-packages (the checkout is on the venv's path), only the installed folder, from a folder
    # of the user's: what a user's `import training` would find.
    done = subprocess.run([sys.executable, '-S', '-c', probe], env={**os.environ, 'PYTHONPATH': str(target)},
                          cwd=str(tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    layout_file, *absent = done.stdout.split()
    assert layout_file.startswith(str(target))
    assert absent == ['True'] * len(COMMON_WORDS)


def test_in_the_dev_install_only_the_import_root_is_importable_and_each_file_is_one_module(tmp_path):
    """The venv's editable install maps ``imgrec`` alone: from a folder of the user's, the checkout's top-level
    folders are not importable, and ``imgrec.contract.layout`` is the checkout's file, under one name."""
    probe = ('import importlib.util, sys, imgrec.contract.layout as layout, imgrec.pipelines.options as options; '
             'print(layout.__file__); print(options.__file__); '
             f'print(*[importlib.util.find_spec(name) is None for name in {COMMON_WORDS!r}]); '
             "print(sorted(m for m in sys.modules if m.split('.')[0] in " + repr(COMMON_WORDS) + '))')
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    done = subprocess.run([sys.executable, '-c', probe], env=env, cwd=str(tmp_path), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    layout_file, options_file, absent, loaded = done.stdout.splitlines()
    assert layout_file == os.path.join(ROOT, 'imgrec', 'contract', 'layout.py')
    assert os.path.realpath(options_file) == os.path.join(ROOT, 'pipelines', 'options.py')
    assert absent.split() == ['True'] * len(COMMON_WORDS)
    assert loaded == '[]'
