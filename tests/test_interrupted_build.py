"""Ctrl-C during a build ends in one line, 'interrupted', saying what was left behind; never a '[done]' line."""
import os
import signal
import subprocess
import sys
import time

from imgrec.contract import layout
from imgrec.pipelines import build_dataset
from imgrec_storage import publication
from imgrec.samples.generate import write_images

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _staging_folders(output):
    return [name for name in os.listdir(output) if layout.is_staging_name(name)] if output.is_dir() else []


def _stopped(pid):
    """Whether ``pid`` or one of its children (the command runs in a child of its supervisor) is stopped."""
    with open(f'/proc/{pid}/task/{pid}/children', encoding='ascii') as children:
        pids = [pid, *map(int, children.read().split())]
    for each in pids:
        try:
            with open(f'/proc/{each}/stat', encoding='ascii') as stat:
                text = stat.read()
        except FileNotFoundError:
            continue
        if text[text.rfind(')') + 2:][:1] == 'T':
            return True
    return False


def test_ctrl_c_ends_with_interrupted_naming_the_staging_folder_left_which_clean_removes(tmp_path):
    images, output = tmp_path / 'images', tmp_path / 'out'
    write_images(str(images), 8, min_side=40, max_side=80)
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode', 'in_memory']
    # The build stops itself midway, its staging folder written and nothing published, however fast it runs.
    build = subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv, '--version', 'v1'],
                             cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             env=dict(os.environ, **{publication.PAUSE_AT: 'metadata:after_files'}))
    deadline = time.monotonic() + 120
    while not _stopped(build.pid):
        assert build.poll() is None and time.monotonic() < deadline, 'the build did not reach its pause'
        time.sleep(0.01)
    # The terminal's Ctrl-C: SIGINT to the whole process group, taken as the build goes on.
    os.killpg(build.pid, signal.SIGINT)
    os.killpg(build.pid, signal.SIGCONT)
    rest = build.stderr.read()
    assert build.wait(timeout=120) == 130, rest
    assert build.stdout.read() == ''
    [staging] = _staging_folders(output)
    assert rest == (f'build-dataset: interrupted: nothing was published (LATEST is as it was); left the staging '
                    f'folder {output / staging} (a build with --clean removes it)\n'), rest
    assert not (output / layout.LATEST).exists()

    assert build_dataset.main([*argv, '--version', 'v2', '--clean']) == 0
    assert not (output / staging).exists() and (output / layout.LATEST).read_text().strip() == 'v2'
