"""Readers hold leases (docs/publication.md#readers): load(), the Grain source, verify-dataset and
dataset-report take a reader lease on the version they read, renewed while they read and released when they
end, so a build's --keep_versions never deletes it under them; a crashed reader's lease is dead at once on its
machine. Locally and on gs:// (the GCS emulator)."""
import gc
import os
import shutil
import subprocess
import sys

import pytest

from imgrec.contract import layout
from imgrec.storage import leases, retention, storage
from imgrec.samples.generate import write_images
from imgrec.versions import verify
from imgrec.versions.report import command as report_command
from tests.conftest import SMALL, listing, run_build
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def published(tmp_path_factory):
    """An output with v1 and v2 (LATEST) published, ArrayRecord shards too, to copy; and its images."""
    images = tmp_path_factory.mktemp('reader-leases') / 'images'
    write_images(str(images), 3, png_every=0, **SMALL)
    output = tmp_path_factory.mktemp('reader-leases-out') / 'out'
    for version in ('v1', 'v2'):
        run_build(output, '--input', images, '--version', version, '--force', '--formats', 'tfrecord,array_record',
                  '--num_shards', 'train=1,validation=1')
    return output


def _copy(published, tmp_path):
    copy = tmp_path / 'out'
    shutil.copytree(published, copy)  # file times too: v1 stays the older version
    return copy


def _readers(output):
    folder = output / layout.LEASES_DIR
    return sorted(name for name in os.listdir(folder) if name.startswith(layout.READER_LEASE)) if folder.exists() else []


def test_load_holds_a_lease_while_its_dataset_lives_and_pruning_leaves_the_version(published, tmp_path):
    from imgrec.training.dataset import load  # pylint: disable=import-outside-toplevel  # TensorFlow: this test only
    output = _copy(published, tmp_path)
    examples = load(str(output), 'train', version='v1', verbose=False)
    assert len(_readers(output)) == 1
    kept = retention.keep_newest(str(output), 1)
    assert kept.deleted == () and [entry.version for entry in kept.kept] == ['v2', 'v1']
    assert kept.kept[1].why.startswith('leased by a reader')
    assert sum(1 for _ in examples) == len(examples) > 0  # read whole, after the pruning
    del examples
    gc.collect()
    assert _readers(output) == []  # its lease ended with it
    assert retention.keep_newest(str(output), 1).deleted == ('v1',)


def test_the_grain_source_holds_a_lease_while_it_lives(published, tmp_path):
    pytest.importorskip('grain')
    from imgrec.training.grain_input import grain_source  # pylint: disable=import-outside-toplevel
    output = _copy(published, tmp_path)
    batches = grain_source(str(output), 'train', version='v1', batch_size=2)
    assert len(_readers(output)) == 1
    assert retention.keep_newest(str(output), 1).deleted == ()
    assert sum(len(labels) for _, labels in batches) > 0
    del batches
    gc.collect()
    assert _readers(output) == [] and retention.keep_newest(str(output), 1).deleted == ('v1',)


def _pruned_midway(monkeypatch, module, name, output, seen):
    """``module.name`` wrapped: a build's pruning to --keep_versions 1 runs as it starts."""
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        seen.append(retention.keep_newest(output, 1))
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapped)


def test_verify_dataset_and_dataset_report_hold_a_lease_while_they_read(published, tmp_path, monkeypatch):
    output = _copy(published, tmp_path)
    seen = []
    _pruned_midway(monkeypatch, verify, '_verify', str(output), seen)
    assert verify.main([str(output / 'v1')]) == 0
    _pruned_midway(monkeypatch, report_command, 'write_report', str(output), seen)
    assert report_command.main([str(output / 'v1')]) == 0
    assert [retention.deleted for retention in seen] == [(), ()]
    assert _readers(output) == []
    assert retention.keep_newest(str(output), 1).deleted == ('v1',)
    assert verify.main([str(output / 'v1')]) == 2  # pruned: no version there now


def test_a_crashed_readers_lease_is_dead_at_once_on_its_machine(published, tmp_path):
    output = _copy(published, tmp_path)
    code = ('import os, sys\nfrom imgrec.storage import leases\n'
            'lease = leases.reader_lease(sys.argv[1], "v1")\nassert lease is not None\nos._exit(9)\n')
    assert subprocess.run([sys.executable, '-c', code, str(output)], cwd=ROOT, check=False).returncode == 9
    assert len(_readers(output)) == 1  # left behind, dead
    assert retention.keep_newest(str(output), 1).deleted == ('v1',)


def test_a_folder_without_latest_gets_no_lease_written_into_it(published, tmp_path):
    alone = tmp_path / 'copied'
    shutil.copytree(published / 'v1', alone / 'v1')
    with leases.reading(str(alone), 'v1') as lease:
        assert lease is None
    assert listing(alone) == ['v1']


def test_a_user_reader_takes_one_with_reading(published, tmp_path):
    output = _copy(published, tmp_path)
    with leases.reading(str(output), 'v1') as lease:
        assert lease is not None and len(_readers(output)) == 1
        assert retention.keep_newest(str(output), 1).deleted == ()
    assert _readers(output) == []
    with pytest.raises(leases.Pruned):
        assert retention.keep_newest(str(output), 1).deleted == ('v1',)
        with leases.reading(str(output), 'v1'):
            pass


def test_verify_dataset_on_gcs_holds_a_lease_while_it_reads(gcs_emulator, published, monkeypatch):
    bucket = gcs_emulator.create_bucket('reader-leases')
    output = f'{bucket}/out'
    for path in published.rglob('*'):
        if path.is_file() and layout.LEASES_DIR not in path.parts:
            gcs_emulator.upload_bytes(f'{output}/{path.relative_to(published).as_posix()}', path.read_bytes())
    seen = []
    _pruned_midway(monkeypatch, verify, '_verify', output, seen)
    assert verify.main([f'{output}/v1']) == 0
    assert seen[0].deleted == () and seen[0].kept[1].why.startswith('leased by a reader')
    assert not [url for url in gcs_emulator.list(f'{output}/{layout.LEASES_DIR}/')]
    assert retention.keep_newest(output, 1, storage.storage_for(output)).deleted == ('v1',)
