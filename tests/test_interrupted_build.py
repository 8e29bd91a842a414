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


def _build(argv, **env):
    """build-dataset as its console entry point runs it: supervised, in a session of its own."""
    return subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, **env})


def test_sigterm_ends_with_terminated_naming_what_was_left_as_ctrl_c_does(tmp_path):
    images, output = tmp_path / 'images', tmp_path / 'out'
    write_images(str(images), 150, min_side=40, max_side=80)
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode', 'in_memory',
            '--version', 'v1']
    build = _build(argv)
    deadline = time.monotonic() + 120
    while not _spilled(output):
        assert build.poll() is None and time.monotonic() < deadline, 'the build wrote no spill file'
        time.sleep(0.01)
    build.send_signal(signal.SIGTERM)  # to the supervising parent, as a scheduler sends it; it passes it on
    rest = build.stderr.read()
    assert build.wait(timeout=120) == 143, rest
    [staging] = _staging_folders(output)
    assert rest == (f'build-dataset: terminated: nothing was published (LATEST is as it was); left the staging '
                    f'folder {output / staging} (a build with --clean removes it)\n'), rest


def test_sigterm_after_latest_moved_says_the_version_was_published_never_failed(tmp_path):
    images, output = tmp_path / 'images', tmp_path / 'out'
    write_images(str(images), 12, min_side=40, max_side=80)
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode', 'in_memory',
            '--version', 'v1']
    build = _build(argv, IMGREC_PAUSE_AT='publish:after_latest')
    deadline = time.monotonic() + 120
    while not (output / layout.LATEST).exists() or not _stopped(build.pid):
        assert build.poll() is None and time.monotonic() < deadline, 'the build did not pause after LATEST'
        time.sleep(0.02)
    build.send_signal(signal.SIGTERM)
    os.killpg(build.pid, signal.SIGCONT)
    rest = build.stderr.read()
    assert build.wait(timeout=120) == 143, rest
    assert rest.startswith('build-dataset: terminated: published version v1 before it stopped'), rest
    assert 'failed' not in rest
    assert (output / layout.LATEST).read_text().strip() == 'v1'


def test_sigterm_after_promotion_says_the_version_is_whole_and_the_rerun_finishes_it(tmp_path):
    images, output = tmp_path / 'images', tmp_path / 'out'
    write_images(str(images), 12, min_side=40, max_side=80)
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode', 'in_memory',
            '--version', 'v1']
    build = _build(argv, IMGREC_PAUSE_AT='promote:after_rename')
    deadline = time.monotonic() + 120
    while not (output / 'v1' / layout.DATASET_JSON).exists() or not _stopped(build.pid):
        assert build.poll() is None and time.monotonic() < deadline, 'the build did not pause after promotion'
        time.sleep(0.02)
    build.send_signal(signal.SIGTERM)
    os.killpg(build.pid, signal.SIGCONT)
    rest = build.stderr.read()
    assert build.wait(timeout=120) == 143, rest
    assert rest.startswith(f'build-dataset: terminated: version v1 is whole in {output}, but LATEST still names '
                           f'nothing: run the same command again (same --version) to finish the publication'), rest
    assert not (output / layout.LATEST).exists()
    rerun = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv], cwd=ROOT, text=True,
                           capture_output=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert (output / layout.LATEST).read_text().strip() == 'v1'


def _stopped(pid):
    with open(f'/proc/{pid}/stat', encoding='ascii') as stream:
        text = stream.read()
    return text[text.rfind(')') + 2:][:1] == 'T'
