"""The publication protocol (docs/publication.md) under concurrent builds, readers and crashes, locally and
on gs:// (the GCS emulator).

Deterministic: a build is paused by SIGSTOP (or stops itself at a named step, ``IMGREC_PAUSE_AT``) and
the test waits for what it can observe (a file, the process's stopped state), or a build ends itself at
a named step as a SIGKILL would (``IMGREC_CRASH_AT``). Nothing waits in the hope of an order.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from imgrec.contract import layout, version_ref
from imgrec.storage import crash_points, leases, retention, staging, storage, tidying
from imgrec.versions import verify
from imgrec.pipelines import build_dataset, launcher, summary
from imgrec.samples.generate import write_images
from tests.conftest import SMALL, listing
from tests.contract_checks import check_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--splits', 'train=80,validation=20',
           '--num_shards', 'train=2,validation=1')
GIVE_UP_S = 600  # only so that a broken build fails the test instead of hanging it: never an expected time


def _argv(images, output, *extra):
    return ['--input', str(images), '--output', str(output), *OPTIONS, *extra]


def _build(images, output, *extra):
    """(exit status, stdout, stderr) of the build run in this process."""
    return build_dataset.main(_argv(images, output, *extra))


def _start(images, output, *extra, env=None, log=None):
    """The build as its own process (and process group), its output in the file ``log``."""
    stream = open(log, 'wb') if log else subprocess.DEVNULL  # pylint: disable=consider-using-with
    return subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *_argv(images, output, *extra)],
                            cwd=ROOT, env=dict(os.environ, **(env or {})), stdout=stream, stderr=stream,
                            start_new_session=True)


def _crash(images, output, step, *extra, tmp_path):
    """Runs the build in its own process, made to end at ``step``; returns its exit status."""
    process = _start(images, output, *extra, env={crash_points.CRASH_AT: step}, log=tmp_path / f'{step}.log')
    status = process.wait(timeout=GIVE_UP_S)
    assert status == 137, (tmp_path / f'{step}.log').read_text()[-3000:]
    return status


def _state(pid):
    with open(f'/proc/{pid}/stat') as stream:
        text = stream.read()
    return text[text.rfind(')') + 2]


def _wait_for(condition, process, what):
    deadline = time.monotonic() + GIVE_UP_S
    while not condition():
        assert process.poll() is None, f'the build ended before {what}'
        assert time.monotonic() < deadline, f'no {what} after {GIVE_UP_S} s'
        time.sleep(0.01)


def _tree(folder):
    """{relative path: size} of every file below ``folder``."""
    return {os.path.relpath(os.path.join(directory, name), folder): os.path.getsize(os.path.join(directory, name))
            for directory, _, names in os.walk(folder) for name in names}


def _staging(output):
    return [name for name in os.listdir(output) if layout.is_staging_name(name)]


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('protocol') / 'images'
    write_images(str(root), 4, png_every=0, **SMALL)
    return root


@pytest.fixture(scope='module')
def edited(images, tmp_path_factory):
    """``images`` with one new image: a refresh of it decodes one image and publishes."""
    root = tmp_path_factory.mktemp('protocol-edited') / 'images'
    shutil.copytree(images, root)
    fresh = tmp_path_factory.mktemp('protocol-fresh')
    (path,) = write_images(str(fresh), 1, classes=('circle',), seed=77, png_every=0, **SMALL)
    shutil.copy(path, root / 'circle' / 'zz_new.jpg')
    return root


@pytest.fixture(scope='module')
def published(images, tmp_path_factory):
    """An output with v1 and v2 (LATEST) published, to copy."""
    output = tmp_path_factory.mktemp('protocol-published') / 'out'
    assert _build(images, output, '--version', 'v1') == 0
    assert _build(images, output, '--version', 'v2', '--force') == 0
    return output


def _copy(output, tmp_path):
    copy = tmp_path / 'out'
    shutil.copytree(output, copy)  # file times too: v1 stays the older version
    return copy


# -- leases, without a build ------------------------------------------------------------------------------

HOLDER = ('import sys\nfrom imgrec.storage import leases, storage\n'
          'lease = leases.Lease(storage.storage_for(sys.argv[1]), sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4])\n'
          'lease.acquire()\nprint("held", flush=True)\nsys.stdin.read()\n')


def _published_version(output, name):
    (output / name).mkdir(parents=True)
    (output / name / layout.DATASET_JSON).write_text('{}')
    (output / name / 'train-00000-of-00001.tfrecord').write_bytes(b'x')


def test_a_build_lease_protects_its_staging_folder_while_its_process_lives(tmp_path):
    output = tmp_path / 'out'
    staging = layout.staging_name('v2', 'abc123')
    (output / staging / layout.SPILL_DIR).mkdir(parents=True)
    (output / staging / layout.SPILL_DIR / 'x.spill').write_bytes(b'x')
    holder = subprocess.Popen([sys.executable, '-c', HOLDER, str(output), layout.BUILD_LEASE, staging, 'abc123'],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b'held\n'
        os.kill(holder.pid, signal.SIGSTOP)  # paused: alive, and its lease with it
        assert tidying.tidy(str(output), clean=True) == tidying.Tidied(0, ())
        assert _tree(output / staging) == {'spill/x.spill': 1}
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    # Killed: the lease is dead at once (the same machine sees the process gone), --clean or not.
    assert tidying.tidy(str(output)) == tidying.Tidied(1, ())
    assert listing(output) == []  # the staging folder, the lease and the lease folder


def test_a_lease_from_another_machine_lives_until_it_expires(tmp_path):
    output = tmp_path / 'out'
    _published_version(output, 'v1')
    (output / layout.LATEST).write_text('v1\n')
    staging = layout.staging_name('v2', 'far0001')
    (output / staging).mkdir()
    (output / staging / 'train-00000-of-00001.tfrecord').write_bytes(b'x')
    (output / 'v2').mkdir()  # a promotion cut short: no dataset.json
    (output / 'v2' / 'labels.txt').write_text('a\n')
    lease = leases.document(layout.BUILD_LEASE, 'far0001', staging, 'far0001', leases.TTL_S,
                            {'machine': 'another-machine', 'pid': 1, 'started': 1, 'host': 'elsewhere'})
    path = output / layout.lease_file_name(layout.BUILD_LEASE, 'far0001')
    path.parent.mkdir()
    path.write_bytes(leases.encode(lease))
    assert tidying.tidy(str(output), clean=True).staging_removed == 0
    assert (output / staging).is_dir() and (output / 'v2').is_dir()
    path.write_bytes(leases.encode(dict(lease, expires_at=time.time() - 1)))
    assert tidying.tidy(str(output)).staging_removed == 1
    assert listing(output) == [layout.LATEST, 'v1']  # v1 is published: kept


def test_a_staging_folder_without_a_lease_goes_with_clean_or_once_a_newer_version_is_published(tmp_path):
    output = tmp_path / 'out'
    (output / layout.staging_name('v2', 'old0001')).mkdir(parents=True)  # a failed build's, or an older release's
    assert tidying.tidy(str(output)).staging_removed == 0  # nothing published since: maybe still running
    assert tidying.tidy(str(output), clean=True).staging_removed == 1
    assert os.listdir(output) == []


def test_a_lease_taken_over_is_lost_to_its_holder_and_never_written_again(tmp_path):
    output = tmp_path / 'out'
    output.mkdir()
    lost = []
    lease = leases.Lease(storage.storage_for(str(output)), str(output), layout.BUILD_LEASE, layout.staging_name('v1', 'id1'),
                         'id1', on_lost=lost.append).acquire()
    assert lease.renew() and lease.holds()
    (entry,) = leases.read_all(storage.storage_for(str(output)), str(output))
    assert leases.take_over(storage.storage_for(str(output)), str(output), entry) is None  # live: not to be taken
    with open(entry.path, 'wb') as stream:  # as it looks once lapsed, held on another machine
        stream.write(leases.encode(dict(entry.lease, holder=None, expires_at=0)))
    (entry,) = leases.read_all(storage.storage_for(str(output)), str(output))
    taken = leases.take_over(storage.storage_for(str(output)), str(output), entry)
    assert taken is not None and not lease.holds()
    assert not lease.renew() and lost == [lease] and not lease.renew() and lost == [lease]
    lease.release()  # not its own any more: left to the cleanup
    assert os.path.exists(entry.path)
    taken.release()
    assert os.listdir(output) == []


def test_a_reader_lease_blocks_pruning_and_pruning_unpublishes_first(tmp_path):
    output = tmp_path / 'out'
    for version in ('v1', 'v2', 'v3'):
        _published_version(output, version)
    (output / layout.LATEST).write_text('v3\n')
    files = storage.storage_for(str(output))
    reader = leases.hold_reader(files, str(output), 'v1')
    kept = retention.keep_newest(str(output), 1)
    assert kept.deleted == ('v2',) and [entry.version for entry in kept.kept] == ['v3', 'v1']
    assert kept.kept[0].why == 'LATEST' and kept.kept[1].why == f'leased by a reader (pid {os.getpid()} on ' \
                                                                f'{socket.gethostname()}, lease {reader.id})'
    assert listing(output) == [layout.LATEST, layout.LEASES_DIR, 'v1', 'v3']
    reader.release()
    assert retention.keep_newest(str(output), 1) == retention.Retention(1, (retention.Kept('v3', 'LATEST'),),
                                                                            ('v1',))
    assert listing(output) == [layout.LATEST, 'v3']
    # A reader that comes after the pruning finds nothing to lease.
    assert leases.hold_reader(files, str(output), 'v1') is None and listing(output) == [layout.LATEST, 'v3']


def test_the_lease_folder_is_never_a_version_or_a_staging_folder(tmp_path):
    output = tmp_path / 'out'
    _published_version(output, 'v1')
    with leases.Lease(storage.storage_for(str(output)), str(output), layout.READER_LEASE, 'v1'):
        (output / layout.LEASES_DIR / layout.DATASET_JSON).write_text('{}')  # even if something put one there
        assert [version for _, version in retention.published_versions(str(output))] == ['v1']
        assert staging.staging_folders(str(output)) == []
        with pytest.raises(version_ref.VersionError, match="names '_leases', which is the name of the lease folder"):
            version_ref.latest_name('_leases\n', 'out/LATEST')
        (output / layout.LEASES_DIR / layout.DATASET_JSON).unlink()
    for name in ('_leases', '_LEASES'):
        with pytest.raises(version_ref.VersionError, match='lease folder'):
            version_ref.check_version_name(name)


# -- case 1: --clean while another build runs --------------------------------------------------------------

@pytest.mark.parametrize('pause', ['before_promote', 'first_shard'])
def test_clean_during_a_paused_build_leaves_it_to_publish_a_whole_version(pause, images, edited, published,
                                                                          tmp_path, capsys):
    output = _copy(published, tmp_path)
    env = {crash_points.PAUSE_AT: 'publish:before_promote'} if pause == 'before_promote' else {}
    build_a = _start(edited, output, '--version', 'v3', env=env, log=tmp_path / 'a.log')
    try:
        if pause == 'first_shard':
            _wait_for(lambda: any(name.endswith('.tfrecord') for staging in _staging(output)
                                  for name in os.listdir(output / staging)), build_a, 'first shard')
            os.killpg(build_a.pid, signal.SIGSTOP)
        _wait_for(lambda: _state(build_a.pid) == 'T', build_a, 'pause')
        (staging,) = _staging(output)
        before = _tree(output / staging)
        capsys.readouterr()
        # Build B: the same output, its input unchanged since v2, with --clean.
        assert _build(images, output, '--version', 'v4', '--clean') == 0
        assert 'nothing changed since version v2' in capsys.readouterr().out
        assert _tree(output / staging) == before
    finally:
        os.killpg(build_a.pid, signal.SIGCONT)
    assert build_a.wait(timeout=GIVE_UP_S) == 0, (tmp_path / 'a.log').read_text()[-3000:]
    assert (output / layout.LATEST).read_text() == 'v3\n'
    document, _ = check_version(str(output), input_root=str(edited))
    assert document['refresh']['new'] == 1
    assert listing(output) == [layout.LATEST, 'v1', 'v2', 'v3']


# -- case 4: a crash mid-pruning ---------------------------------------------------------------------------

def test_a_crash_mid_pruning_is_finished_by_the_next_build_even_when_nothing_changed(images, published, tmp_path,
                                                                                     capsys):
    output = _copy(published, tmp_path)
    whole = _tree(output / 'v1')
    _crash(images, output, 'prune:mid_delete', '--version', 'v3', '--force', '--keep_versions', '1',
           tmp_path=tmp_path)
    assert (output / layout.LATEST).read_text() == 'v3\n'
    left = _tree(output / 'v1')
    assert layout.DATASET_JSON not in left and 0 < len(left) < len(whole)  # unpublished first, then half deleted
    capsys.readouterr()
    assert verify.main([str(output / 'v1')]) == 2
    assert 'is not a published version: it has no dataset.json' in capsys.readouterr().err
    assert _build(images, output, '--version', 'v4') == 0
    out = capsys.readouterr().out
    assert 'finished an interrupted pruning: deleted version(s) v1' in out and 'nothing changed since version v3' in out
    assert listing(output) == [layout.LATEST, 'v2', 'v3']


def test_a_build_that_finds_nothing_changed_still_prunes_to_exactly_keep_versions(images, published, tmp_path,
                                                                                  capsys):
    output = _copy(published, tmp_path)
    capsys.readouterr()
    assert _build(images, output, '--version', 'v3', '--keep_versions', '1') == 0
    out = capsys.readouterr().out
    assert 'nothing changed since version v2' in out
    assert 'pruned to --keep_versions 1: kept v2 (LATEST); deleted v1' in out
    assert listing(output) == [layout.LATEST, 'v2']


# -- case 5: pruning never deletes the version a training run reads ----------------------------------------

def test_a_training_run_holds_its_version_and_the_summary_names_what_pruning_kept_and_deleted(
        images, published, tmp_path, capsys, monkeypatch):
    from imgrec.training import train, trainer  # pylint: disable=import-outside-toplevel  # TensorFlow: this test only
    output = _copy(published, tmp_path)
    seen = {}

    def build_while_training(config, source):
        """Stands in for the epochs: two builds with --keep_versions 1 publish v3 and v4 meanwhile."""
        assert source.version == 'v1'
        assert [name.split('-')[0] for name in os.listdir(output / layout.LEASES_DIR)] == [layout.READER_LEASE]
        for version in ('v3', 'v4'):
            config_, facts, options = launcher.parse(_argv(images, output, '--version', version, '--force',
                                                                 '--keep_versions', '1'))
            config_, facts, result = launcher.launch(config_, facts, options)
            seen[version] = summary.report(config_, facts, result, options)

    monkeypatch.setattr(trainer, 'train', build_while_training)
    assert train.main(['--data', str(output), '--version', 'v1', '--model_dir', str(tmp_path / 'model')]) == 0
    reader = f'leased by a reader (pid {os.getpid()} on {socket.gethostname()}, lease '
    # The version the build started from (v2) is not kept: exactly --keep_versions stay, and the leased one.
    assert f'pruned to --keep_versions 1: kept v3 (LATEST), v1 ({reader}' in seen['v3']
    assert '; deleted v2' in seen['v3']
    assert f'pruned to --keep_versions 1: kept v4 (LATEST), v1 ({reader}' in seen['v4']
    assert '; deleted v3' in seen['v4']
    assert listing(output) == [layout.LATEST, 'v1', 'v4']  # the lease went with the run
    capsys.readouterr()
    assert _build(images, output, '--version', 'v5', '--force', '--keep_versions', '1') == 0
    assert 'pruned to --keep_versions 1: kept v5 (LATEST); deleted v1, v4' in capsys.readouterr().out
    assert listing(output) == [layout.LATEST, 'v5']


# -- gs://: a crash mid-pruning (crashes at each step: tests/test_publication_crashes.py) ----------------------

@pytest.fixture(scope='module')
def gcs_published(gcs_emulator, images):
    """(input prefix, an output with v1 published) on the emulator, to copy."""
    bucket = gcs_emulator.create_bucket('protocol')
    gcs_emulator.upload_folder(images, f'{bucket}/images')
    output = f'{bucket}/published'
    assert _build(f'{bucket}/images', output, '--version', 'v1') == 0
    return f'{bucket}/images', output


def _gcs_copy(emulator, source, target):
    for url in emulator.list(source + '/'):
        emulator.upload_bytes(target + url[len(source):], emulator.read_bytes(url))
    return target


def _names(emulator, prefix):
    return sorted(url[len(prefix) + 1:] for url in emulator.list(prefix + '/'))


def test_a_crash_mid_pruning_on_gcs_is_finished_by_a_build_that_publishes_nothing(gcs_emulator, gcs_published,
                                                                                   tmp_path, capsys):
    source, published = gcs_published
    output = _gcs_copy(gcs_emulator, published, f'{published}-pruning')
    assert _build(source, output, '--version', 'v2', '--force') == 0
    _crash(source, output, 'prune:after_unpublish', '--version', 'v3', '--force', '--keep_versions', '1',
           tmp_path=tmp_path)
    names = _names(gcs_emulator, output)
    assert 'v1/' + layout.DATASET_JSON not in names and 'v1/' + layout.LABELS_TXT in names
    assert json.loads(gcs_emulator.read_bytes(f'{output}/v3/{layout.DATASET_JSON}'))['version'] == 'v3'
    capsys.readouterr()
    assert _build(source, output, '--version', 'v4') == 0
    out = capsys.readouterr().out
    assert 'finished an interrupted pruning: deleted version(s) v1' in out and 'nothing changed since version v3' in out
    assert sorted({name.split('/')[0] for name in _names(gcs_emulator, output)}) == [layout.LATEST, 'v2', 'v3']
