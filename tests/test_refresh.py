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

import pytest

from imgrec.contract import layout
from imgrec.console.errors import build_failure_message
from imgrec.imaging.record_options import RecordOptions
from imgrec.pipelines import build_dataset, preflight, refresh
from imgrec.pipelines.preflight import read_latest
from imgrec.samples.generate import write_images
from imgrec.samples.near_duplicates import draw_photo, make_twin
from tests.conftest import SMALL, listing
from tests.contract_checks import check_version, load_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ('--splits', 'train=80,validation=20', '--num_shards', 'train=2,validation=1')


def _images(tmp_path, name='images', per_class=6):
    root = tmp_path / name
    write_images(str(root), per_class, png_every=4, **SMALL)
    return root


def _refresh(images, output, *extra):
    config, result = build_dataset.run(['--input', str(images), '--output', str(output), '--image_size', '32',
                                        '--direct_running_mode', 'in_memory', *OPTIONS, *extra])
    return config, result


def _files(version_dir):
    """{relative path: bytes} of a version, less the files that name the run (its time, output, refresh)."""
    return {os.path.relpath(os.path.join(folder, name), version_dir): open(os.path.join(folder, name), 'rb').read()
            for folder, _, names in os.walk(version_dir) for name in names
            if name not in (layout.DATASET_JSON, layout.REPORT_HTML)}


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
    assert build_dataset.counter(result, 'images_decoded') == new + changed  # only those were read
    assert build_dataset.counter(result, 'images_reused') == listed - new - changed
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
    assert build_dataset.counter(result, 'bytes_read') == os.path.getsize(sorted((images / 'cross').iterdir())[0])
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
    assert build_dataset.counter(result, 'images_decoded') == document['counts']['inputs']
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
        patched.setattr(build_dataset, 'build_pipeline', no_pipeline)
        assert build_dataset.main(argv) == 0
        assert capsys.readouterr().out.splitlines() == [
            'build-dataset: nothing changed since version v1: no new version published, LATEST stays '
            '(--force publishes anyway)']
        assert (output / layout.LATEST).read_text() == 'v1\n' and listing(output) == [layout.LATEST, 'v1']
        _, result = _refresh(images, output, '--version', 'v2')  # decided before any pipeline: nothing was read
        assert isinstance(result, build_dataset.NothingChanged)
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
    script = ('import sys\nfrom imgrec.storage.publication import Latest, read_latest, replace_latest\n'
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
    assert build_dataset.counter(unchanged_build, 'images_decoded') == 0  # quarantined again, unread
    _, second = load_version(str(output))
    assert second['quarantine']['by_reason'] == {'not_an_image': 1}
    _change(broken, (images / 'square' / 'square_00000.jpg').read_bytes() + b' ')
    _, result = _refresh(images, output, '--version', 'v3')
    _, third = load_version(str(output))
    assert third['quarantine']['by_reason'] == {} and third['counts']['written'] == first['counts']['written'] + 1
    assert third['refresh']['changed'] == 1 and build_dataset.counter(result, 'images_decoded') == 1


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
    config, _, options = build_dataset.parse(['--input', str(images), '--output', str(output), '--image_size', '32',
                                              '--direct_running_mode', 'in_memory', *OPTIONS, *extra])
    config, latest = preflight.check(config, options)
    return refresh.nothing_changed(config, refresh.plan(config, latest), options)


def _touch_file(path):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def _touch(images):
    _touch_file(sorted((images / 'cross').iterdir())[0])


@pytest.mark.parametrize('edit', [
    pytest.param(lambda images: _change(sorted((images / 'cross').iterdir())[0], _fresh_image(images, 31, 'cross')),
                 id='changed'),
    pytest.param(_touch, id='touched'),
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
    assert isinstance(result, build_dataset.NothingChanged)
    _refresh(images, output, '--version', 'v2', '--force', *errors)
    named = ('dataset_info.json',)  # names the version
    assert ({name: data for name, data in _files(output / 'v2').items() if name not in named}
            == {name: data for name, data in _files(output / 'v1').items() if name not in named})
    _touch_file(images / 'triangle' / 'near_twin.jpg')
    assert not _decides_nothing_changed(images, output, '--version', 'v3', *errors)


def test_a_refresh_writes_the_near_duplicate_conflicts_an_earlier_version_quarantined(tmp_path, capsys):
    """A version that quarantined a near-duplicate pair under two labels (asked to, or built before they
    were kept): an unchanged input is not "nothing changed" under the default rule, which decides the pair
    again and writes both, in one split; the summary says so in one line."""
    images = _with_label_conflicts(tmp_path)
    output = tmp_path / 'out'
    _refresh(images, output, '--version', 'v1', '--max_error_rate', '0.2', '--near_duplicate_conflicts', 'quarantine')
    assert not _decides_nothing_changed(images, output, '--version', 'v2', '--max_error_rate', '0.2')
    assert build_dataset.main(['--input', str(images), '--output', str(output), '--image_size', '32',
                               '--direct_running_mode', 'in_memory', *OPTIONS, '--version', 'v2',
                               '--max_error_rate', '0.2', '--no_progress']) == 0
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
