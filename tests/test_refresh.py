"""Scheduled refresh: a build into an output with a published version decodes only what changed, keeps
label numbers, and publishes exactly what a ``--full`` build into the same output would."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.parquet
import pytest

from imgrec.contract import index, layout, metadata
from imgrec.console.errors import UserError, build_failure_message
from imgrec.imaging.record_options import RecordOptions
from imgrec.pipelines import build_dataset, build_result, launcher, options, preflight, python_api, refresh, summary
from imgrec.storage import tidying
from imgrec.storage.latest import read_latest
from imgrec.samples.generate import write_images
from imgrec.samples.near_duplicates import draw_photo, make_twin
from tests.conftest import SMALL, listing
from tests.contract_checks import check_version, load_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The near-duplicates these builds plant are edited copies: the perceptual check finds them.
OPTIONS = ('--splits', 'train=80,validation=20', '--num_shards', 'train=2,validation=1', '--near_duplicate_check',
           'perceptual')


def _images(tmp_path, name='images', per_class=6):
    root = tmp_path / name
    write_images(str(root), per_class, png_every=4, **SMALL)
    return root


def _refresh(images, output, *extra):
    config, result = launcher.run(['--input', str(images), '--output', str(output), '--image_size', '32',
                                        '--direct_running_mode', 'in_memory', *OPTIONS, *extra])
    return config, result


def _files(version_dir):
    """{relative path: bytes} of a version, less the files that name the run (its time, output, refresh)."""
    return {os.path.relpath(os.path.join(folder, name), version_dir): open(os.path.join(folder, name), 'rb').read()
            for folder, _, names in os.walk(version_dir) for name in names
            if name not in (layout.DATASET_JSON, layout.REPORT_HTML, layout.REPORT_STATE_JSON)}


def _change(path, data):
    """New bytes in place: the listing sees another size or modification time."""
    path.write_bytes(data)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def _fresh_image(images, seed, kind='circle'):
    """The bytes of a newly generated image, unlike any in the corpus."""
    folder = images.parent / f'fresh-{seed}'
    (path,) = write_images(str(folder), 1, classes=(kind,), seed=seed, png_every=0, **SMALL)
    data = open(path, 'rb').read()
    shutil.rmtree(folder)
    return data


def _edit_input(images):
    """Adds two images (one in a new class), changes one image, deletes one: returns (new, changed, removed)."""
    circles = sorted((images / 'circle').iterdir())
    (images / 'circle' / 'aa_new.jpg').write_bytes(_fresh_image(images, 11))
    (images / 'aardvark').mkdir()
    (images / 'aardvark' / 'a.jpg').write_bytes(_fresh_image(images, 7, 'triangle'))
    _change(circles[0], _fresh_image(images, 12))
    circles[1].unlink()
    return 2, 1, 1


def test_a_refresh_publishes_what_a_full_build_would_reading_only_what_changed(tmp_path):
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    before, first = load_version(str(output))
    shutil.copytree(output, tmp_path / 'full')  # the same output, for a --full build beside the refresh
    new, changed, removed = _edit_input(images)
    listed = sum(1 for path in images.rglob('*') if path.is_file())
    config, result = _refresh(images, output, '--version', 'v2')
    version_dir, document = load_version(str(output))
    assert document['version'] == 'v2'
    assert document['refresh'] == {'previous': 'v1', 'mode': 'incremental', 'full_reason': None, 'new': new,
                                   'changed': changed, 'removed': removed, 'reused': listed - new - changed,
                                   'decoded': new + changed, 'reuse_damaged': 0}
    assert summary.counter(result, 'images_decoded') == new + changed  # only those were read
    assert summary.counter(result, 'images_reused') == listed - new - changed
    # Label numbers never move: the new class comes last, although it sorts first.
    assert document['labels'] == first['labels'] + ['aardvark']
    assert open(os.path.join(version_dir, layout.LABELS_TXT)).read().splitlines() == document['labels']
    check_version(str(output), input_root=str(images))
    # The same bytes as a --full build into the same output: the same splits, the same label order.
    _refresh(images, tmp_path / 'full', '--version', 'v2', '--full')
    full_dir, full = load_version(str(tmp_path / 'full'))
    assert full['refresh']['mode'] == 'full' and full['refresh']['previous'] == 'v1'
    assert _files(version_dir) == _files(full_dir)
    for key in ('splits', 'counts', 'quarantine', 'duplicates', 'decoding', 'index', 'labels'):
        assert document[key] == full[key], key
    # The previous version is intact.
    assert os.path.exists(os.path.join(before, layout.DATASET_JSON))


def test_a_refresh_reads_only_what_changed_and_full_or_a_changed_record_option_rebuilds_everything(tmp_path, capsys):
    """One output refreshed version after version, each refresh starting from the last: the checks of reuse,
    of label order, of --full and of a changed record option share their builds (each costs Beam's fixed
    setup, seconds of CPU, for a dozen images)."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    _, first = load_version(str(output))
    assert first['label_order'] == 'sorted class names'
    # Only the changed image is read: the bytes read are its bytes. (Bytes changed under the same size and
    # modification time are noticed by the inode change time: tests/test_reuse_checks.py.)
    _change(sorted((images / 'cross').iterdir())[0], _fresh_image(images, 13, 'cross'))
    _, result = _refresh(images, output, '--version', 'v2')
    _, document = load_version(str(output))
    assert document['refresh']['decoded'] == 1 and document['counts']['quarantined'] == 0
    assert document['counts']['written'] == first['counts']['written']
    assert summary.counter(result, 'bytes_read') == os.path.getsize(sorted((images / 'cross').iterdir())[0])
    # dataset.json records how labels were ordered.
    (images / 'zebra').mkdir()
    (images / 'zebra' / 'z.jpg').write_bytes(_fresh_image(images, 21, 'cross'))
    config, _ = _refresh(images, output, '--version', 'v3')
    _, document = load_version(str(output))
    assert document['label_order'] == 'version v2, new classes appended in sorted order'
    assert document['record_options'] == json.loads(json.dumps(config.record_options.recorded()))
    assert document['record_options']['image_size'] == [32, 32] and document['record_options']['encoder']
    assert RecordOptions.from_recorded(document['record_options']) == config.record_options == RecordOptions((32, 32))
    # --full forces decoding everything.
    _, result = _refresh(images, output, '--version', 'v4', '--full')
    _, document = load_version(str(output))
    assert document['refresh']['full_reason'] == '--full was given'
    assert summary.counter(result, 'images_decoded') == document['counts']['inputs']
    # A changed record option rebuilds everything and says why.
    capsys.readouterr()
    status = build_dataset.main(['--input', str(images), '--output', str(output), '--image_size', '24',
                                 '--direct_running_mode', 'in_memory', *OPTIONS, '--version', 'v5'])
    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert out[0] == 'build-dataset: full build: --image_size changed since version v4 (32x32 -> 24x24)'
    _, document = load_version(str(output))
    assert document['refresh']['mode'] == 'full' and document['refresh']['decoded'] == document['counts']['inputs']
    assert document['refresh']['previous'] == 'v4' and '--image_size' in document['refresh']['full_reason']


def test_nothing_changed_publishes_nothing_unless_forced_and_an_edit_after_is_published(tmp_path, capsys,
                                                                                         monkeypatch):
    """One output refreshed again and again, the builds shared (each costs Beam's fixed setup): a refresh that
    changes nothing says so in one line before any pipeline starts; the job's own check publishes nothing
    either; an edit after a refresh that changed nothing is published; --force publishes anyway; another
    option (not one that shapes a record) is a change too; and a refresh that changes nothing still prunes."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    (images / 'notes.txt').write_text('not an image: ignored, as the job ignores it')
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode',
            'in_memory', *OPTIONS, '--version', 'v2']
    capsys.readouterr()

    def no_pipeline(*args, **kwargs):
        raise AssertionError('a pipeline was built for a refresh that changes nothing')
    with monkeypatch.context() as patched:
        patched.setattr(launcher, 'build_pipeline', no_pipeline)
        assert build_dataset.main(argv) == 0
        assert capsys.readouterr().out.splitlines() == [
            'build-dataset: nothing changed since version v1: no new version published, LATEST stays '
            '(--force publishes anyway)']
        assert (output / layout.LATEST).read_text() == 'v1\n' and listing(output) == [layout.LATEST, 'v1']
        _, result = _refresh(images, output, '--version', 'v2')  # decided before any pipeline: nothing was read
        assert isinstance(result, build_result.NothingChanged)
    # An edit after a refresh that changed nothing is published.
    (images / 'cross' / 'zz_new.jpg').write_bytes(_fresh_image(images, 33, 'cross'))
    _refresh(images, output, '--version', 'v2')
    _, document = load_version(str(output))
    assert document['version'] == 'v2' and document['refresh']['new'] == 1
    check_version(str(output), input_root=str(images))
    # The job's own check, for the runs no check before them reaches (a classic template's) and an input that
    # changed back between that check and the job's listing: here the check before the job is made to say
    # "changed", and the job, finding nothing new, publishes nothing and leaves no staging folder.
    capsys.readouterr()
    with monkeypatch.context() as patched:
        patched.setattr(refresh, 'nothing_changed', lambda *args: False)
        assert build_dataset.main(argv[:-1] + ['v3']) == 0
    assert 'build-dataset: nothing changed since version v2' in capsys.readouterr().out
    assert (output / layout.LATEST).read_text() == 'v2\n' and listing(output) == [layout.LATEST, 'v1', 'v2']
    # --force publishes anyway.
    assert build_dataset.main(argv[:-1] + ['v3', '--force']) == 0
    assert (output / layout.LATEST).read_text() == 'v3\n'
    # Another option (not one that shapes a record) is a change too: reuse, and publish.
    capsys.readouterr()
    assert build_dataset.main(argv[:-1] + ['v4', '--num_shards', 'train=3,validation=1']) == 0
    _, document = load_version(str(output))
    assert document['version'] == 'v4' and document['refresh']['reused'] == document['counts']['inputs']
    # A refresh that changes nothing still prunes to --keep_versions.
    capsys.readouterr()
    assert build_dataset.main(argv[:-1] + ['v5', '--num_shards', 'train=3,validation=1', '--keep_versions', '1']) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('build-dataset: nothing changed since version v4')
    assert out[1:] == ['  pruned to --keep_versions 1: kept v4 (LATEST); deleted v1, v2, v3']
    assert (output / layout.LATEST).read_text() == 'v4\n' and listing(output) == [layout.LATEST, 'v4']


def _versions_and_latest(output):
    return [name for name in listing(output) if not layout.is_staging_name(name)]


@pytest.fixture(scope='module')
def published_v1(tmp_path_factory):
    """(images, an output with v1 of them published): copied by the tests that only build again from the same
    images, never editing them (each build costs Beam's fixed setup)."""
    root = tmp_path_factory.mktemp('refresh-v1')
    images = _images(root)
    _refresh(images, root / 'out', '--version', 'v1')
    return images, root / 'out'


def _copy_of(published_v1, tmp_path):
    images, published = published_v1
    return images, shutil.copytree(published, tmp_path / 'out')


def test_keep_versions_prunes_the_oldest_after_publishing_even_the_version_started_from(published_v1, tmp_path):
    images, output = _copy_of(published_v1, tmp_path)
    assert listing(output) == [layout.LATEST, 'v1']
    _refresh(images, output, '--version', 'v2', '--force')
    _refresh(images, output, '--version', 'v3', '--force', '--keep_versions', '2')
    assert listing(output) == [layout.LATEST, 'v2', 'v3']
    # A failed build deletes nothing.
    with pytest.raises(Exception) as failure:  # the runner wraps our BuildFailed in its own type
        _refresh(images, output, '--version', 'v4', '--force', '--keep_versions', '1', '--max_pixels', '1')
    assert build_failure_message(failure.value)
    assert _versions_and_latest(output) == [layout.LATEST, 'v2', 'v3']
    # LATEST points back at the older version (a rollback), which the next build starts from: once LATEST
    # moved on, it is not kept (exactly --keep_versions versions stay).
    (output / layout.LATEST).write_text('v2\n')
    _refresh(images, output, '--version', 'v5', '--force', '--keep_versions', '1')
    assert _versions_and_latest(output) == [layout.LATEST, 'v5']


def test_overlapping_builds_publish_once_and_the_loser_fails_in_one_line(published_v1, tmp_path, monkeypatch,
                                                                        capsys):
    images, output = _copy_of(published_v1, tmp_path)
    # Build A starts (LATEST is v1); build B starts and publishes v3 first; then A reaches publication.
    started = read_latest(str(output), None)
    assert started.version == 'v1'
    _refresh(images, output, '--version', 'v3', '--force')
    monkeypatch.setattr('imgrec.pipelines.preflight.read_latest', lambda *args: started)
    status = build_dataset.main(['--input', str(images), '--output', str(output), '--image_size', '32',
                                 '--direct_running_mode', 'in_memory', *OPTIONS, '--version', 'v2', '--force'])
    # Progress lines ('build-dataset: [step] ...') come every 10 s of a build that takes longer (a loaded machine).
    err = '\n'.join(line for line in capsys.readouterr().err.strip().splitlines()
                    if not line.startswith('build-dataset: ['))
    assert status == 1 and '\n' not in err
    assert err.startswith('build-dataset: failed: LATEST of ') and 'another build published first' in err
    assert (output / layout.LATEST).read_text() == 'v3\n'
    for version in ('v1', 'v2', 'v3'):  # both builds' files are intact
        assert os.path.exists(output / version / layout.DATASET_JSON)


def test_latest_is_never_read_half_written_by_concurrent_writers(tmp_path):
    """Many processes replace LATEST at once; a reader only ever sees one whole name."""
    output = tmp_path / 'out'
    output.mkdir()
    (output / layout.LATEST).write_text('v0\n')
    script = ('import sys\nfrom imgrec.storage.latest import Latest, read_latest, replace_latest\n'
              'for i in range(200):\n'
              '    try:\n'
              '        replace_latest(sys.argv[1], sys.argv[2] + str(i), read_latest(sys.argv[1]))\n'
              '    except Exception as error:\n'
              '        assert "another build published first" in str(error)\n')
    writers = [subprocess.Popen([sys.executable, '-c', script, str(output), f'w{n}-'], cwd=ROOT) for n in range(3)]
    seen = set()
    while any(writer.poll() is None for writer in writers):
        seen.add((output / layout.LATEST).read_text())
    assert all(writer.returncode == 0 for writer in writers)
    assert seen
    assert all(text.endswith('\n') and text.count('\n') == 1 and len(text) > 2 for text in seen), seen
    assert not [name for name in os.listdir(output) if name != layout.LATEST]  # no temporary file left


def test_a_refresh_killed_before_publishing_leaves_latest_and_the_next_one_succeeds(tmp_path):
    images = _images(tmp_path, per_class=12)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    _edit_input(images)
    process = subprocess.Popen(
        [sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', str(images), '--output', str(output),
         '--image_size', '32', '--direct_running_mode', 'in_memory', *OPTIONS, '--version', 'v2'],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any(layout.is_staging_name(name) for name in os.listdir(output)):
        assert process.poll() is None and time.monotonic() < deadline, 'the build ended before it could be killed'
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert (output / layout.LATEST).read_text() == 'v1\n'
    check_version(str(output))  # v1 whole
    assert not (output / 'v2').exists()
    config, _ = _refresh(images, output, '--version', 'v2')
    _, document = load_version(str(output))
    assert document['version'] == 'v2' and document['refresh']['mode'] == 'incremental'
    # The killed build's staging folder was older than v2's publication: the build after removes it.
    _refresh(images, output, '--version', 'v3', '--force')
    assert listing(output) == [layout.LATEST, 'v1', 'v2', 'v3']


def test_stale_staging_folders_are_removed_and_clean_removes_every_one(published_v1, tmp_path):
    """One output for both staging checks, the builds shared (each costs Beam's fixed setup): a staging folder
    killed before its first file, older than the version published after it, is removed by the next build;
    one newer than LATEST's publication may still be running and stays, until --clean."""
    images, output = _copy_of(published_v1, tmp_path)  # file times too: v1 was published when it was
    killed = layout.staging_name('v1', 'killed0001')
    (output / killed / layout.SPILL_DIR).mkdir(parents=True)  # folders only
    stat = (output / killed).stat()
    published_ns = (output / 'v1' / layout.DATASET_JSON).stat().st_mtime_ns  # v1's publication
    os.utime(output / killed / layout.SPILL_DIR, ns=(stat.st_atime_ns, published_ns - 10**9))
    os.utime(output / killed, ns=(stat.st_atime_ns, published_ns - 10**9))  # killed a second before v1 was published
    newer = layout.staging_name('v9', 'deadbeef')
    (output / newer / layout.SPILL_DIR).mkdir(parents=True)
    (output / newer / layout.SPILL_DIR / 'x.spill').write_bytes(b'x')
    _refresh(images, output, '--version', 'v2', '--force')
    assert newer in os.listdir(output)  # newer than v1: maybe still running
    assert listing(output) == sorted([layout.LATEST, 'v1', 'v2', newer])  # the killed one is gone
    _refresh(images, output, '--version', 'v3', '--force', '--clean')
    assert listing(output) == [layout.LATEST, 'v1', 'v2', 'v3']


def test_a_quarantined_image_fixed_in_place_is_decoded_and_written(tmp_path):
    images = _images(tmp_path)
    output = tmp_path / 'out'
    broken = images / 'square' / 'broken.jpg'
    broken.write_bytes(b'<html>not found</html>')
    _refresh(images, output, '--version', 'v1')
    _, first = load_version(str(output))
    assert first['quarantine']['by_reason'] == {'not_an_image': 1}
    unchanged_build = _refresh(images, output, '--version', 'v2', '--force')[1]
    assert summary.counter(unchanged_build, 'images_decoded') == 0  # quarantined again, unread
    _, second = load_version(str(output))
    assert second['quarantine']['by_reason'] == {'not_an_image': 1}
    _change(broken, (images / 'square' / 'square_00000.jpg').read_bytes() + b' ')
    _, result = _refresh(images, output, '--version', 'v3')
    _, third = load_version(str(output))
    assert third['quarantine']['by_reason'] == {} and third['counts']['written'] == first['counts']['written'] + 1
    assert third['refresh']['changed'] == 1 and summary.counter(result, 'images_decoded') == 1


def test_a_duplicate_whose_twin_is_gone_is_written(tmp_path):
    images = _images(tmp_path)
    output = tmp_path / 'out'
    twin = images / 'square' / 'zz_copy.jpg'
    shutil.copy(images / 'square' / 'square_00000.jpg', twin)
    _refresh(images, output, '--version', 'v1')
    _, first = load_version(str(output))
    assert first['counts']['duplicates'] == 1
    shutil.copytree(output, tmp_path / 'full')
    (images / 'square' / 'square_00000.jpg').unlink()
    _refresh(images, output, '--version', 'v2')
    version_dir, document = load_version(str(output))
    assert document['counts']['duplicates'] == 0 and document['refresh']['decoded'] == 1
    _, by_split = check_version(str(output), input_root=str(images))
    assert 'square/zz_copy.jpg' in {r['image/source'].decode() for records in by_split.values() for r in records}
    _refresh(images, tmp_path / 'full', '--version', 'v2', '--full')
    assert _files(version_dir) == _files(load_version(str(tmp_path / 'full'))[0])


# -- a refresh that changes nothing, decided before any pipeline starts -------------------------------------

def _decides_nothing_changed(images, output, *extra):
    """What the check before the job decides for a refresh of ``images`` into ``output`` (no pipeline runs)."""
    config, facts, options = launcher.parse(['--input', str(images), '--output', str(output), '--image_size', '32',
                                              '--direct_running_mode', 'in_memory', *OPTIONS, *extra])
    config, latest = preflight.check(config, options, facts.destination)
    return refresh.nothing_changed(config, refresh.plan(config, latest), options)


def _touch_file(path):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def _same_size_other_bytes(path):
    """Rewrites ``path`` with its last byte changed: its size is the same, its stamp and sha256 are not."""
    data = path.read_bytes()
    _change(path, data[:-1] + bytes([data[-1] ^ 1]))


def _rewrite_same_bytes(images):
    """Every image of one class written again with the bytes it has: a new stamp (mtime, ctime, and an
    inode of its own), the same content, as regenerating the README's sample files does."""
    touched = sorted((images / 'cross').iterdir())
    for path in touched:
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data)
        _touch_file(path)
    return touched


def test_touched_but_identical_files_are_reused_and_publish_nothing(tmp_path, capsys, monkeypatch):
    """Files written again with the same bytes (issue 37): the check before the job reads and hashes only
    them, finds their sha256 unchanged and publishes nothing; so does the job's own check; forced, the
    version reuses every record (none decoded), records the new stamps, so that the next refresh reads
    nothing, and holds the bytes a --full build would."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    touched = _rewrite_same_bytes(images)
    read = []
    real_sha256 = refresh.previous_version.source_sha256
    monkeypatch.setattr(refresh.previous_version, 'source_sha256',
                        lambda storage, path: read.append(path) or real_sha256(storage, path))
    assert _decides_nothing_changed(images, output, '--version', 'v2')
    assert sorted(read) == sorted(map(str, touched))  # only the files whose stamp moved were read
    monkeypatch.undo()
    argv = ['--input', str(images), '--output', str(output), '--image_size', '32', '--direct_running_mode',
            'in_memory', '--progress', 'off', *OPTIONS]
    capsys.readouterr()
    assert build_dataset.main([*argv, '--version', 'v2']) == 0
    assert capsys.readouterr().out.startswith('build-dataset: nothing changed since version v1')
    with monkeypatch.context() as patched:  # the job's own check
        patched.setattr(refresh, 'nothing_changed', lambda *args: False)
        assert build_dataset.main([*argv, '--version', 'v2']) == 0
    assert 'build-dataset: nothing changed since version v1' in capsys.readouterr().out
    assert listing(output) == [layout.LATEST, 'v1']
    shutil.copytree(output, tmp_path / 'full')
    assert build_dataset.main([*argv, '--version', 'v2', '--force']) == 0
    version_dir, document = load_version(str(output))
    assert document['version'] == 'v2' and document['refresh']['decoded'] == 0
    assert document['refresh']['reused'] == document['counts']['inputs']
    assert build_dataset.main(['--input', str(images), '--output', str(tmp_path / 'full'), '--image_size', '32',
                               '--direct_running_mode', 'in_memory', '--progress', 'off', *OPTIONS,
                               '--version', 'v2', '--full']) == 0
    assert _files(version_dir) == _files(load_version(str(tmp_path / 'full'))[0])
    # The new stamps are recorded: the next refresh reads no file at all.
    read.clear()
    monkeypatch.setattr(refresh.previous_version, 'source_sha256',
                        lambda storage, path: read.append(path) or real_sha256(storage, path))
    assert _decides_nothing_changed(images, output, '--version', 'v3') and read == []


@pytest.mark.parametrize('edit', [
    pytest.param(lambda images: _change(sorted((images / 'cross').iterdir())[0], _fresh_image(images, 31, 'cross')),
                 id='changed'),
    pytest.param(lambda images: _same_size_other_bytes(sorted((images / 'cross').iterdir())[0]),
                 id='same size, other bytes'),
    pytest.param(lambda images: (images / 'cross' / 'zz_new.jpg').write_bytes(_fresh_image(images, 32, 'cross')),
                 id='added'),
    pytest.param(lambda images: sorted((images / 'circle').iterdir())[0].unlink(), id='removed'),
    pytest.param(lambda images: (images / 'zebra').mkdir(), id='new empty class'),
    pytest.param(lambda images: shutil.move(str(sorted((images / 'circle').iterdir())[0]), str(images / 'cross')),
                 id='moved to another class'),
])
def test_a_changed_added_or_removed_image_is_no_refresh_that_changes_nothing(tmp_path, edit):
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    assert _decides_nothing_changed(images, output, '--version', 'v2')
    edit(images)
    assert not _decides_nothing_changed(images, output, '--version', 'v2')
    assert _decides_nothing_changed(images, output, '--version', 'v2', '--force') is False


def _with_label_conflicts(tmp_path):
    """Class folders holding the same bytes under two classes (label_conflict) and a near-duplicate pair under
    two others."""
    images = _images(tmp_path)
    photo = draw_photo(200, 150, random.Random(5))
    photo.save(images / 'circle' / 'both.jpg', quality=92)
    shutil.copy(images / 'circle' / 'both.jpg', images / 'cross' / 'both.jpg')  # label_conflict, twice
    photo = draw_photo(200, 150, random.Random(6))
    photo.save(images / 'square' / 'near.jpg', quality=92)
    twin, _, quality = make_twin(photo, 'jpeg', random.Random(7))
    twin.save(images / 'triangle' / 'near_twin.jpg', quality=quality)  # a near-duplicate pair under two labels
    return images


def test_an_unchanged_input_with_label_conflicts_is_a_refresh_that_changes_nothing(tmp_path):
    """Copies and near-duplicates filed under two classes are quarantined (the near-duplicates when asked) for
    what the whole input holds; an input in which nothing changed gets the same verdicts, so its refresh
    publishes nothing (and, forced, publishes the same bytes)."""
    errors = ('--max_error_rate', '0.2', '--near_duplicate_conflicts', 'quarantine')  # 4 of 28 quarantined
    images = _with_label_conflicts(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1', *errors)
    quarantined = [json.loads(line) for line in (output / 'v1' / layout.QUARANTINE_JSONL).read_text().splitlines()]
    assert sorted((item['source'], item['reason']) for item in quarantined) == [
        ('circle/both.jpg', 'label_conflict'), ('cross/both.jpg', 'label_conflict'),
        ('square/near.jpg', 'near_duplicate_label_conflict'),
        ('triangle/near_twin.jpg', 'near_duplicate_label_conflict')]
    assert _decides_nothing_changed(images, output, '--version', 'v2', *errors)
    _, result = _refresh(images, output, '--version', 'v2', *errors)
    assert isinstance(result, build_result.NothingChanged)
    _refresh(images, output, '--version', 'v2', '--force', *errors)
    named = ('dataset_info.json',)  # names the version
    assert ({name: data for name, data in _files(output / 'v2').items() if name not in named}
            == {name: data for name, data in _files(output / 'v1').items() if name not in named})
    _touch_file(images / 'triangle' / 'near_twin.jpg')
    assert not _decides_nothing_changed(images, output, '--version', 'v3', *errors)


# -- a refresh keeps the published settings it is not given (issue 37) -----------------------------------------

def _splits_of(version_dir):
    """{source: split} of a version's record index."""
    with open(os.path.join(version_dir, layout.DATASET_JSON)) as stream:
        document = json.load(stream)
    found = {}
    for name in document['index']['files']:
        for row in pyarrow.parquet.read_table(os.path.join(version_dir, name)).to_pylist():
            found[row[index.SOURCE]] = row[index.SPLIT]
    return found


def test_a_refresh_without_its_options_keeps_the_published_splits_and_says_so(tmp_path, capsys, monkeypatch):
    """v1 is built with --splits 50/50, --stratify and 32x32 records; the cron line that leaves them out keeps
    all three (not the defaults 90/10 and 192), says so in one line, and reuses every record; a given --splits
    other than v1's is refused before any pipeline, in one line naming both, unless --resplit."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    built = ['--input', str(images), '--output', str(output), '--direct_running_mode', 'in_memory',
             '--progress', 'off']
    assert build_dataset.main([*built, '--version', 'v1', '--image_size', '32', '--stratify',
                               '--splits', 'train=50,validation=50']) == 0
    (images / 'cross' / 'zz_new.jpg').write_bytes(_fresh_image(images, 41, 'cross'))
    shutil.copytree(output, tmp_path / 'full')  # the same output, for a --full build beside the refresh
    capsys.readouterr()
    assert build_dataset.main([*built, '--version', 'v2']) == 0
    out = capsys.readouterr().out.splitlines()
    assert '  kept the settings of version v1 not given: --image_size 32, --splits train=50,validation=50, ' \
           '--stratify' in out
    version_dir, document = load_version(str(output))
    assert document['version'] == 'v2' and document['options']['splits'] == {'train': 50, 'validation': 50}
    assert document['options']['stratify'] is True and document['record_options']['image_size'] == [32, 32]
    assert document['refresh']['mode'] == 'incremental' and document['refresh']['decoded'] == 1
    first, second = _splits_of(str(output / 'v1')), _splits_of(version_dir)
    assert {source: second[source] for source in first} == first  # no published image moved
    # A --full build that leaves the same options out keeps them too, and writes the same bytes.
    full = [arg if arg != str(output) else str(tmp_path / 'full') for arg in built]
    assert build_dataset.main([*full, '--version', 'v2', '--full']) == 0
    assert _files(version_dir) == _files(str(tmp_path / 'full' / 'v2'))
    # A given --splits other than the published one: refused before any pipeline, nothing published.
    def no_pipeline(*args, **kwargs):
        raise AssertionError('a pipeline was built for a refused build')
    with monkeypatch.context() as patched:
        patched.setattr(launcher, 'build_pipeline', no_pipeline)
        assert build_dataset.main([*built, '--version', 'v3', '--splits', 'train=90,validation=10']) == 2
    err = capsys.readouterr().err.strip()
    assert err == ('build-dataset: error: --splits train=90,validation=10 would move published images between '
                   'splits: version v2 was built with --splits train=50,validation=50; give --resplit to deal every '
                   'image again, or leave --splits out to keep the published splits')
    assert listing(output) == [layout.LATEST, 'v1', 'v2']
    # The same --splits given (in another order) is no change; with --resplit another one is taken.
    assert build_dataset.main([*built, '--version', 'v3', '--splits', 'validation=50,train=50']) == 0
    assert 'nothing changed since version v2' in capsys.readouterr().out
    assert build_dataset.main([*built, '--version', 'v3', '--splits', 'train=75,validation=25', '--resplit',
                               '--split_tolerance', '20']) == 0  # 6 images a class, stratified
    _, document = load_version(str(output))
    assert document['version'] == 'v3' and document['options']['splits'] == {'train': 75, 'validation': 25}


def test_build_keeps_the_published_settings_as_the_command_line_does(tmp_path):
    images = _images(tmp_path)
    output = tmp_path / 'out'
    common = dict(input=str(images), output=str(output), progress=False,
                  beam_options=['--direct_running_mode=in_memory'])
    python_api.build(**common, version='v1', image_size=32, splits={'train': 60, 'validation': 40})
    (images / 'cross' / 'zz_new.jpg').write_bytes(_fresh_image(images, 42, 'cross'))
    result = python_api.build(**common, version='v2')
    assert result['options']['splits'] == {'train': 60, 'validation': 40}
    assert result['record_options']['image_size'] == [32, 32] and result['refresh']['decoded'] == 1
    assert 'kept the settings of version v1 not given: --image_size 32, --splits train=60,validation=40' in \
        result.summary
    with pytest.raises(UserError) as raised:
        python_api.build(**common, version='v3', splits={'train': 90, 'validation': 10})
    assert str(raised.value).startswith('--splits train=90,validation=10 would move published images between splits')


def test_identity_is_the_one_rule_of_the_same_build_for_refresh_publication_and_dataset_json(tmp_path):
    """refresh.plan's "same options" (a refresh that may publish nothing), publication's "same build" (a rerun
    of a published --version) and dataset.json's options all come from one identity(): they agree on every
    variation, the naming options (output, version, name) are the only ones it leaves out, and a record
    option counts once (in record_options, with the encoder)."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    version_dir, document = load_version(str(output))
    latest = read_latest(str(output))
    base = ['--input', str(images), '--output', str(output), '--image_size', '32', *OPTIONS, '--version', 'v1']
    variations = {(): True, ('--version', 'v9'): True, ('--name', 'other'): True, ('--resplit',): True,
                  ('--stratify',): False, ('--near_duplicates', 'report'): False, ('--jpeg_quality', '80'): False,
                  ('--max_error_rate', '0.5'): False, ('--formats', 'tfrecord,array_record'): False}
    for extra, same in variations.items():
        config = options.parse_args([*base, *extra])[0]
        config = refresh.carry_over(config, latest)
        plan = refresh.plan(config, latest)
        assert plan.same_options is same, extra
        assert tidying.same_build(document, config.recorded()) is same, extra
        assert (metadata.identity(document) == config.identity()) is same, extra
    config = refresh.carry_over(options.parse_args(base)[0], latest)
    recorded = config.recorded()
    assert recorded['options'] == {key: value for key, value in json.loads(json.dumps(document['options'])).items()}
    assert recorded['record_options'] == document['record_options']
    assert not set(recorded['options']) & set(recorded['record_options'])
    assert set(config.describe()) - set(metadata.identity(recorded)['options']) - set(RecordOptions.__annotations__) \
        == set(metadata.NAMING_OPTIONS)


@pytest.mark.parametrize('changed', [('--stratify',), ('--near_duplicates', 'report'), ('--near_duplicates', 'off')])
def test_a_given_stratify_or_near_duplicates_change_moves_no_published_image(tmp_path, capsys, changed):
    """Unlike --splits, these change how new images are dealt, not where published ones are: the build is
    not refused, says so in one line, and every published image keeps its split."""
    images = _images(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1')
    (images / 'cross' / 'zz_new.jpg').write_bytes(_fresh_image(images, 43, 'cross'))
    capsys.readouterr()
    _refresh(images, output, '--version', 'v2', *changed, '--split_tolerance', '20')
    shown = ' '.join(changed)
    was = '--no_stratify' if changed == ('--stratify',) else '--near_duplicates group'
    assert (f"build-dataset: {shown} differs from version v1's {was}: its images keep their splits; new images "
            'are dealt by the new setting') in capsys.readouterr().out.splitlines()
    version_dir, document = load_version(str(output))
    assert document['version'] == 'v2'
    first, second = _splits_of(str(output / 'v1')), _splits_of(version_dir)
    assert {source: second[source] for source in first} == first


def test_a_refresh_writes_the_near_duplicate_conflicts_an_earlier_version_quarantined(tmp_path, capsys):
    """A version that quarantined a near-duplicate pair under two labels (asked to, or built before they
    were kept): an unchanged input is not "nothing changed" under the rule that keeps them, which decides the
    pair again and writes both, in one split; the summary says so in one line. (Left out, the option keeps
    the published version's value, as every setting a refresh is not given does: so it is given here.)"""
    images = _with_label_conflicts(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1', '--max_error_rate', '0.2', '--near_duplicate_conflicts', 'quarantine')
    assert not _decides_nothing_changed(images, output, '--version', 'v2', '--max_error_rate', '0.2')
    assert build_dataset.main(['--input', str(images), '--output', str(output), '--image_size', '32',
                               '--direct_running_mode', 'in_memory', *OPTIONS, '--version', 'v2',
                               '--max_error_rate', '0.2', '--no_progress', '--near_duplicate_conflicts', 'keep']) == 0
    printed = capsys.readouterr()
    quarantined = [json.loads(line) for line in (output / 'v2' / layout.QUARANTINE_JSONL).read_text().splitlines()]
    assert sorted((item['source'], item['reason']) for item in quarantined) == [
        ('circle/both.jpg', 'label_conflict'), ('cross/both.jpg', 'label_conflict')]  # the same bytes: still
    document = json.loads((output / 'v2' / layout.DATASET_JSON).read_text())
    near = document['near_duplicates']
    assert near['conflicts_written_again'] == 2 and near['pairs_across_labels'] == 1
    pair = near['label_conflict_pairs'][0]
    assert {pair['source'], pair['other']} == {'square/near.jpg', 'triangle/near_twin.jpg'}
    assert pair['split'] == pair['other_split']
    assert ('2 images the previous version quarantined as near-duplicate label conflicts were decided again '
            'and written') in printed.out + printed.err


def test_the_exact_check_groups_a_picture_saved_again_with_its_reused_copy_from_the_index(tmp_path):
    """The default check keys a reused record by the sha256 of its JPEG that its version recorded (the index's
    encoded_sha256): a picture saved again after a build is grouped with the published copy, which is not decoded
    again; a row without one is decoded again, and a version that recorded none (built with --near_duplicates off)
    is rebuilt in full, and says why."""
    from PIL import Image  # pylint: disable=import-outside-toplevel
    images, output = _images(tmp_path), tmp_path / 'out'
    exact = ('--near_duplicate_check', 'exact')
    _refresh(images, output, '--version', 'v1', *exact)
    pngs = sorted(images.glob('*/*.png'))[:2]  # decoded whole: a lossless copy writes the same JPEG
    copies = [str(png.parent.relative_to(images) / name) for png, name in zip(pngs, ('zz_again.bmp', 'zz_again.tif'))]
    for original, copy in zip(pngs, copies):
        with Image.open(original) as image:
            image.save(images / copy)
    # One of the originals as a version that recorded no digest left it (a record it reused from an older one).
    unrecorded = str(pngs[1].relative_to(images))
    _without_digest(output / 'v1', unrecorded)
    _refresh(images, output, '--version', 'v2', *exact)
    document = json.loads((output / 'v2' / layout.DATASET_JSON).read_text())
    assert (document['refresh']['mode'], document['refresh']['decoded']) == ('incremental', 3)  # that one again
    rows = [json.loads(line) for line in (output / 'v2' / layout.NEAR_DUPLICATES_JSONL).read_text().splitlines()]
    groups = {}
    for row in rows:
        groups.setdefault(row['group'], set()).add(row['source'])
    assert sorted(groups.values(), key=sorted) == sorted(
        [{str(pngs[0].relative_to(images)), copies[0]}, {unrecorded, copies[1]}], key=sorted)
    assert document['near_duplicates']['check'] == 'same-jpeg-sha256/2'

    unrecorded = tmp_path / 'unrecorded'
    _refresh(images, unrecorded, '--version', 'v1', '--near_duplicates', 'off')
    _refresh(images, unrecorded, '--version', 'v2', '--near_duplicates', 'group', *exact)
    document = json.loads((unrecorded / 'v2' / layout.DATASET_JSON).read_text())
    assert document['refresh']['mode'] == 'full'
    assert 'recorded no sha256 of its written pictures (built with --near_duplicates off)' in (
        document['refresh']['full_reason'])
    assert len(document['near_duplicates']['label_conflict_pairs']) == 0 and document['near_duplicates']['pairs'] == 2


def _without_digest(version_dir, source):
    """Rewrites the index row of ``source`` as a version that recorded no encoded_sha256 wrote it (its checksum
    recomputed: the facts check, only the digest is missing)."""
    for name in os.listdir(version_dir / 'index'):
        path = version_dir / 'index' / name
        table = pyarrow.parquet.read_table(path)
        rows = table.to_pylist()
        if all(row[index.SOURCE] != source for row in rows):
            continue
        for row in rows:
            if row[index.SOURCE] == source:
                row[index.ENCODED_SHA256] = None
                row[index.FACTS_CHECKSUM] = index.facts_checksum(row)
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows, schema=table.schema), path)
