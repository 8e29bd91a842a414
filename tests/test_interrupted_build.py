"""Ctrl-C during a build ends in one line, 'interrupted', saying what was left behind; never a '[done]' line."""
import os
import signal
import subprocess
import sys
import time

from imgrec.contract import layout
from imgrec.pipelines import build_dataset
from imgrec.samples.generate import write_images

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _staging_folders(output):
    return [name for name in os.listdir(output) if layout.is_staging_name(name)] if output.is_dir() else []


def _spilled(output):
    """Whether a staging folder holds a file yet."""
    return any(files for staging in _staging_folders(output) for _, _, files in os.walk(output / staging))


def test_ctrl_c_ends_with_interrupted_naming_the_staging_folder_left_which_clean_removes(tmp_path):
    images, output = tmp_path / 'images', tmp_path / 'out'
    write_images(str(images), 150, min_side=40, max_side=80)  # long enough a build to stop midway
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode', 'in_memory']
    # Started as a terminal's foreground job is, Ctrl-C at its default: a run under nohup or in a background job
    # (as CI may be) hands its children SIGINT ignored, and a command rightly keeps ignoring it.
    build = subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv, '--version', 'v1'],
                             cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # The terminal's Ctrl-C: SIGINT to the whole process group, as soon as decoding has written into the
    # staging folder (its first batch's spill file), watched every 10 ms: the build has hundreds of images left.
    deadline = time.monotonic() + 120
    while not _spilled(output):
        assert build.poll() is None and time.monotonic() < deadline, 'the build wrote no spill file'
        time.sleep(0.01)
    os.killpg(build.pid, signal.SIGINT)
    rest = build.stderr.read()
    assert build.wait(timeout=120) == 130, rest
    assert build.stdout.read() == ''
    [staging] = _staging_folders(output)
    assert rest == (f'build-dataset: interrupted: nothing was published (LATEST is as it was); left the staging '
                    f'folder {output / staging} (a build with --clean removes it)\n'), rest
    assert not (output / layout.LATEST).exists()

    assert build_dataset.main([*argv, '--version', 'v2', '--clean']) == 0
    assert not (output / staging).exists() and (output / layout.LATEST).read_text().strip() == 'v2'
