"""A full disk is a clean, recoverable failure (docs/failures.md#a-full-disk): the build that runs out of space
says so in one line naming the output, the space it needs and the space free, gives back the bulk of what it
staged (keeping its report and quarantine list), and the same command succeeds once that space is freed. A disk
that fills after promotion, as LATEST is written, never says 'failed': the rerun with the same --version
finishes the publication. On a small tmpfs (the suite runs as root); skipped where one cannot be mounted."""
import errno
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from imgrec.contract import layout
from imgrec.pipelines import build_dataset, preflight
from imgrec.storage import crash_points, latest
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ('--image_size', '256', '--direct_running_mode', 'in_memory', '--progress', 'off', '--near_duplicates',
           'off', '--splits', 'train=80,validation=20', '--num_shards', 'train=2,validation=1')
DISK_MB = 80


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of DISK_MB MB, unmounted after the test."""
    disk = tmp_path / 'disk'
    disk.mkdir()
    mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={DISK_MB}m', 'tmpfs', str(disk)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f'cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}')
    try:
        yield disk
    finally:
        subprocess.run(['umount', '-l', str(disk)], check=False)


@pytest.fixture(scope='module')
def noisy(tmp_path_factory):
    """Two classes of 20 noise images (about 100 kB each as a 256x256 JPEG), on the ordinary disk."""
    root = tmp_path_factory.mktemp('noisy')
    rng = np.random.default_rng(7)
    for label in ('a', 'b'):
        os.makedirs(root / label)
        for i in range(20):
            Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(root / label / f'{i}.png')
    return root


def _free(path):
    return os.statvfs(path).f_bavail * os.statvfs(path).f_frsize


def _fill(disk, leave):
    """A filler file that leaves ``leave`` bytes free (0: as full as it gets)."""
    filler = disk / 'filler'
    stream = open(filler, 'ab', buffering=0)  # pylint: disable=consider-using-with
    chunk = b'\0' * 2**20
    try:
        while _free(disk) - leave >= len(chunk):
            stream.write(chunk)
        stream.write(b'\0' * max(0, _free(disk) - leave))
        while not leave:
            stream.write(b'\0' * 4096)
    except OSError:
        pass
    finally:
        stream.close()
    return filler


def _staged_bytes(output):
    return sum(os.path.getsize(os.path.join(folder, name)) for staging in os.listdir(output)
               if layout.is_staging_name(staging) for folder, _, names in os.walk(output / staging) for name in names)


def test_a_build_out_of_space_says_what_it_needs_gives_the_space_back_and_the_rerun_succeeds(small_disk, noisy,
                                                                                             capfd, monkeypatch):
    output = small_disk / 'out'
    argv = ['--input', str(noisy), '--output', str(output), *OPTIONS, '--version', 'v1']
    # The disk check before a build asks for 64 MB free; here 1 MB, so that a small build can fill the disk.
    monkeypatch.setattr(preflight, 'MIN_FREE_BYTES', 2**20)
    filler = _fill(small_disk, 2**20 + 300_000)  # room for a fraction of the build
    before = _free(small_disk)
    assert build_dataset.main(argv) == 1
    err = capfd.readouterr().err.strip().splitlines()[-1]
    match = re.fullmatch(rf'build-dataset: failed: out of space writing {re.escape(str(output))} '
                         r'\(No space left on device\): this build needs '
                         r'about ([\d.]+) MB free \(([\d.]+) (?:kB|MB) written when it filled, 1 MB kept free\); '
                         r'([\d.]+) MB free now that it deleted what it wrote; free space and run the same command '
                         r'again', err)
    assert match, err
    assert float(match[1]) * 1e6 > before and abs(float(match[3]) * 1e6 - before) < 200_000, err
    assert not (output / layout.LATEST).exists()
    assert _staged_bytes(output) < 100_000  # the bulk is gone: spill files, partial shards
    assert _free(small_disk) > before - 200_000
    # A build's worth freed (here: the filler gone), the same command succeeds, and leaves no second folder.
    os.remove(filler)
    assert build_dataset.main(argv) == 0, capfd.readouterr().err
    assert (output / layout.LATEST).read_text().strip() == 'v1'
    # No second folder: only the failed build's, with its report (and no bulk), which the next build removes.
    assert len([name for name in os.listdir(output) if layout.is_staging_name(name)]) == 1
    assert _staged_bytes(output) < 100_000
    assert build_dataset.main(argv) == 0
    assert not [name for name in os.listdir(output) if layout.is_staging_name(name)]


def test_a_failed_build_keeps_its_folder_for_its_rerun_and_another_build_sheds_it(noisy, tmp_path, capfd):
    """Not a full disk: the folder stays whole, so the same command again takes up its records; a build of other
    options is not its rerun, and its cleanup gives back the bulk, keeping the report and the quarantine list."""
    images = tmp_path / 'images'
    (images / 'a').mkdir(parents=True)
    for i in range(3):
        os.symlink(noisy / 'a' / f'{i}.png', images / 'a' / f'{i}.png')
        (images / 'a' / f'bad_{i}.jpg').write_bytes(b'<html>not an image</html>')
    output = tmp_path / 'out'
    argv = ['--input', str(images), '--output', str(output), *OPTIONS, '--splits', 'train=100', '--num_shards',
            'train=1']
    assert build_dataset.main([*argv, '--version', 'v1']) == 1
    assert 'over --max_error_rate' in capfd.readouterr().err
    [staging] = [name for name in os.listdir(output) if layout.is_staging_name(name)]
    assert (output / staging / layout.SPILL_DIR).is_dir()
    assert build_dataset.main([*argv, '--version', 'v2', '--max_error_rate', '1']) == 0
    assert 'not resuming the build stopped at' in capfd.readouterr().out
    assert sorted(os.listdir(output / staging)) == sorted(
        {layout.REPORT_HTML, layout.QUARANTINE_JSONL, layout.BUILD_FAILURE_JSON} | (
            {layout.DUPLICATES_JSONL} if (output / staging / layout.DUPLICATES_JSONL).exists() else set()))


def _stopped(pid):
    with open(f'/proc/{pid}/stat', encoding='ascii') as stream:
        text = stream.read()
    return text[text.rfind(')') + 2:][:1] == 'T'


def test_a_disk_that_fills_as_latest_is_written_never_says_failed_and_the_rerun_finishes(small_disk, noisy):
    output = small_disk / 'out'
    argv = ['--input', str(noisy), '--output', str(output), *OPTIONS]
    assert build_dataset.main([*argv, '--version', 'v1']) == 0
    (noisy / 'b' / 'new.png').write_bytes((noisy / 'b' / '0.png').read_bytes()[:-1] + b'\1')  # something new
    try:
        build = subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv, '--version', 'v2'],
                                 cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True,
                                 env={**os.environ, crash_points.PAUSE_AT: 'promote:after_rename'})
        deadline = time.monotonic() + 300
        while not _stopped(build.pid):
            assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()
            time.sleep(0.02)
        assert (output / 'v2' / layout.DATASET_JSON).exists()
        filler = _fill(small_disk, 0)
        os.killpg(build.pid, signal.SIGCONT)
        err = build.stderr.read()
        assert build.wait(timeout=300) == 1, err
        line = err.strip().splitlines()[-1]
        # Promoted; LATEST not written for want of space. Once the build's lease was released, a few bytes were
        # free again: LATEST was then moved, or it could not be and the rerun moves it. Never 'failed'.
        assert line.startswith('build-dataset: incomplete: '), line
        assert 'No space left on device' in line and ' failed:' not in line, line
        assert (output / layout.LATEST).read_text().strip() in ('v1', 'v2')
        os.remove(filler)
        rerun = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv, '--version', 'v2'],
                               cwd=ROOT, text=True, capture_output=True, check=False)
        assert rerun.returncode == 0, rerun.stderr
        assert (output / layout.LATEST).read_text().strip() == 'v2'
    finally:
        os.remove(noisy / 'b' / 'new.png')


def test_a_version_published_whose_latest_could_not_move_is_finished_by_the_same_command(noisy, tmp_path, capfd,
                                                                                          monkeypatch):
    output = tmp_path / 'out'
    argv = ['--input', str(noisy), '--output', str(output), *OPTIONS, '--num_shards', 'train=1,validation=1']
    assert build_dataset.main([*argv, '--version', 'v1']) == 0
    (noisy / 'b' / 'new.png').write_bytes((noisy / 'b' / '0.png').read_bytes()[:-1] + b'\1')  # something new
    try:
        def full(*args, **kwargs):
            raise OSError(errno.ENOSPC, 'No space left on device')
        monkeypatch.setattr(latest, 'replace_latest', full)  # the step's write and the retry after it
        capfd.readouterr()
        assert build_dataset.main([*argv, '--version', 'v2']) == 1
        line = capfd.readouterr().err.strip().splitlines()[-1]
        assert line.startswith(f'build-dataset: incomplete: version v2 is whole in {output}, but LATEST still names '
                               f'v1: '), line
        assert line.endswith('run the same command again (same --version) to finish the publication'), line
        assert (output / 'v2' / layout.DATASET_JSON).exists() and (output / layout.LATEST).read_text() == 'v1\n'
        monkeypatch.undo()
        assert build_dataset.main([*argv, '--version', 'v2']) == 0
        out = capfd.readouterr().out
        assert 'build-dataset: finished an interrupted publication: LATEST names v2' in out, out
        assert 'nothing changed since version v2' in out, out
        assert (output / layout.LATEST).read_text() == 'v2\n'
    finally:
        os.remove(noisy / 'b' / 'new.png')


def test_a_failed_build_on_gcs_keeps_its_folder_for_its_rerun_and_another_build_sheds_it(gcs_emulator, noisy,
                                                                                          tmp_path, capfd):
    bucket = gcs_emulator.create_bucket('failed-shed')
    images = f'{bucket}/images'
    gcs_emulator.upload_folder(noisy / 'a', f'{images}/a')
    for i in range(8):
        gcs_emulator.upload_bytes(f'{images}/a/bad_{i}.jpg', b'<html>not an image</html>')
    output = f'{bucket}/out'
    argv = ['--input', images, '--output', output, *OPTIONS, '--splits', 'train=100', '--num_shards', 'train=1']
    assert build_dataset.main([*argv, '--version', 'v1']) == 1
    assert 'over --max_error_rate' in capfd.readouterr().err
    assert any(f'/{layout.SPILL_DIR}/' in url for url in gcs_emulator.list(f'{output}/'))
    assert build_dataset.main([*argv, '--version', 'v2', '--max_error_rate', '1']) == 0
    names = {url[len(output) + 1:] for url in gcs_emulator.list(f'{output}/')}
    [staging] = {name.split('/')[0] for name in names if layout.is_staging_name(name.split('/')[0])}
    left = {name.split('/', 1)[1] for name in names if name.startswith(staging + '/')}
    assert left <= {layout.REPORT_HTML, layout.QUARANTINE_JSONL, layout.DUPLICATES_JSONL, layout.BUILD_FAILURE_JSON}
    assert {layout.REPORT_HTML, layout.QUARANTINE_JSONL} <= left


def test_the_next_build_frees_the_bulk_a_failed_build_left_before_it_checks_the_disk(small_disk, noisy, capfd,
                                                                                     monkeypatch):
    """A disk filled to the last byte by what a failed build left (here: with its spill files, as an older release
    left them): the cleanup runs before the disk check, sheds that bulk, and the build goes on."""
    monkeypatch.setattr(preflight, 'MIN_FREE_BYTES', 2**20)
    output = small_disk / 'out'
    staging = output / layout.staging_name('v0', 'failed000001')
    (staging / layout.SPILL_DIR).mkdir(parents=True)
    (staging / layout.REPORT_HTML).write_text('<p>why it failed</p>')
    (staging / layout.BUILD_FAILURE_JSON).write_text('{}')
    _fill(staging / layout.SPILL_DIR, 0)  # the spill files of the failed build fill the disk
    assert _free(small_disk) < 2**16
    assert build_dataset.main(['--input', str(noisy), '--output', str(output), *OPTIONS, '--version', 'v1']) == 0, \
        capfd.readouterr().err
    assert sorted(os.listdir(staging)) == [layout.BUILD_FAILURE_JSON, layout.REPORT_HTML]  # kept until a newer version
    assert (output / layout.LATEST).read_text().strip() == 'v1'
