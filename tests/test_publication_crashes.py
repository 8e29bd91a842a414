"""A build killed at each named crash point (``crash_points.CRASH_POINTS``), locally and on gs:// (the GCS
emulator); then the same command again, as a scheduler's retry would run it, with the same --version.

The rerun exits 0 and leaves what a build that never crashed leaves: LATEST on the new version, exactly
--keep_versions versions, no staging folder, no lease. The crash itself ends the process at once, as a
SIGKILL would (``IMGREC_CRASH_AT``): no cleanup, no ``finally``.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from imgrec.contract import layout
from imgrec.storage import crash_points
from imgrec.versions import verify
from imgrec.pipelines import build_dataset
from imgrec.samples.generate import write_images
from tests.conftest import SMALL, listing
from tests.contract_checks import check_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--splits', 'train=80,validation=20',
           '--num_shards', 'train=2,validation=1', '--version', 'v2', '--force', '--keep_versions', '1')
GIVE_UP_S = 600  # only so that a broken build fails the test instead of hanging it: never an expected time

LOCAL_POINTS = [point for point in crash_points.CRASH_POINTS if point not in crash_points.GCS_ONLY]
GCS_POINTS = [point for point in crash_points.CRASH_POINTS if point not in crash_points.LOCAL_ONLY]


def _argv(images, output):
    return ['--input', str(images), '--output', str(output), *OPTIONS]


def _crash(images, output, point, log):
    """The build, in its own process, made to end at ``point``."""
    with open(log, 'wb') as stream:
        status = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *_argv(images, output)], cwd=ROOT,
                                env=dict(os.environ, **{crash_points.CRASH_AT: point}), stdout=stream,
                                stderr=stream, timeout=GIVE_UP_S, check=False).returncode
    assert status == 137, log.read_text()[-3000:]


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('crashes') / 'images'
    write_images(str(root), 3, png_every=0, **SMALL)
    return root


@pytest.fixture(scope='module')
def published(images, tmp_path_factory):
    """A local output with v1 published (LATEST), to copy."""
    output = tmp_path_factory.mktemp('crashes-published') / 'out'
    assert build_dataset.main(['--input', str(images), '--output', str(output), *OPTIONS[:-5], '--version',
                               'v1']) == 0
    return output


def _left_by_a_crash_at(point, names, read):
    """What the crash at ``point`` left, as the protocol says (docs/publication.md): ``names`` is every
    file below the output, ``read(name)`` its bytes."""
    versions = {name.split('/')[0] for name in names if '/' in name and not name.startswith(layout.LEASES_DIR)
                and not layout.is_staging_name(name.split('/')[0])}
    latest = read(layout.LATEST)
    v2_published = f'v2/{layout.DATASET_JSON}' in names
    assert any(name.startswith(layout.LEASES_DIR + '/') for name in names)  # the dead build's lease
    if point.startswith('prune:') or point == 'publish:after_latest':
        assert latest == b'v2\n' and v2_published
    else:
        assert latest == b'v1\n'
        assert v2_published == (point in ('promote:after_rename', 'promote:after_dataset_json', 'promote:mid_cleanup'))
    if point == 'promote:after_copy':  # every shard copied, the marker not
        assert len([name for name in names if name.startswith('v2/') and name.endswith('.tfrecord')]) == 3
    if point.startswith('prune:'):
        assert f'v1/{layout.DATASET_JSON}' not in names and any(name.startswith('v1/') for name in names)
    else:
        assert 'v1' in versions


def _rerun_completes(images, output, capsys):
    capsys.readouterr()
    assert build_dataset.main(_argv(images, output)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert 'pruned to --keep_versions 1: kept v2 (LATEST)' in out
    return out


@pytest.mark.parametrize('point', LOCAL_POINTS)
def test_a_rerun_after_a_local_crash_at_each_point_completes_the_publication(point, images, published, tmp_path,
                                                                             capsys):
    output = tmp_path / 'out'
    shutil.copytree(published, output)
    _crash(images, output, point, tmp_path / 'crash.log')
    names = [os.path.relpath(os.path.join(folder, name), output).replace(os.sep, '/')
             for folder, _, files in os.walk(output) for name in files]
    _left_by_a_crash_at(point, names, lambda name: (output / name).read_bytes())
    if point == 'promote:after_rename':
        capsys.readouterr()
        assert verify.main([str(output / 'v2')]) == 0  # published whole; LATEST not moved
    _rerun_completes(images, output, capsys)
    assert listing(output) == [layout.LATEST, 'v2']
    assert (output / layout.LATEST).read_text() == 'v2\n'
    check_version(str(output), input_root=str(images))


def _gcs_names(emulator, output):
    return sorted(url[len(output) + 1:] for url in emulator.list(output + '/'))


@pytest.mark.parametrize('point', GCS_POINTS)
def test_a_rerun_after_a_gcs_crash_at_each_point_completes_the_publication(point, images, published, gcs_emulator,
                                                                           tmp_path, capsys):
    bucket = gcs_emulator.create_bucket(f"crash-{point.replace(':', '-').replace('_', '-')}")
    gcs_emulator.upload_folder(images, f'{bucket}/images')
    output = f'{bucket}/out'
    gcs_emulator.upload_folder(published, output)
    _crash(f'{bucket}/images', output, point, tmp_path / 'crash.log')
    _left_by_a_crash_at(point, _gcs_names(gcs_emulator, output),
                        lambda name: gcs_emulator.read_bytes(f'{output}/{name}'))
    before = gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}') \
        if point in ('promote:after_dataset_json', 'promote:mid_cleanup') else None
    if point == 'promote:after_copy':
        capsys.readouterr()
        assert verify.main([f'{output}/v2']) == 2
        assert 'is not a published version: it has no dataset.json' in capsys.readouterr().err
    out = _rerun_completes(f'{bucket}/images', output, capsys)
    if before is not None:  # the complete v2 nothing pointed to is the one LATEST names now
        assert 'finished an interrupted publication: LATEST names v2' in out
        assert gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}') == before
    names = _gcs_names(gcs_emulator, output)
    views = set(os.listdir(published)) - set(listing(published))  # TFDS's, uploaded with the local version
    assert sorted({name.split('/')[0] for name in names} - views) == [layout.LATEST, 'v2']
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v2\n'
    assert json.loads(gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}'))['version'] == 'v2'
    check_version(gcs_emulator.download_folder(output, tmp_path / 'copy'))


def test_the_same_version_again_stands_when_nothing_changed_and_is_refused_when_images_did(images, tmp_path,
                                                                                             capsys):
    source, output = tmp_path / 'images', tmp_path / 'out'
    shutil.copytree(images, source)
    argv = ['--input', str(source), '--output', str(output), *OPTIONS[:-5], '--version', 'v1']
    assert build_dataset.main(argv) == 0
    capsys.readouterr()
    assert build_dataset.main(argv) == 0
    assert 'nothing changed since version v1' in capsys.readouterr().out
    assert build_dataset.main([*argv, '--force']) == 0
    assert 'version v1 stands as an earlier run of this build published it' in capsys.readouterr().out
    (extra,) = write_images(str(tmp_path / 'extra'), 1, classes=('circle',), seed=5, png_every=0, **SMALL)
    shutil.copy(extra, source / 'circle' / 'zz_extra.jpg')
    assert build_dataset.main(argv) == 1
    err = capsys.readouterr().err
    assert 'version v1 already exists' in err and 'images changed since: pass another --version' in err
    # Nothing else published; the failed build's staging folder stays, to be diagnosed, as any failed build's.
    assert [name for name in listing(output) if not layout.is_staging_name(name)] == [layout.LATEST, 'v1']
    assert (output / layout.LATEST).read_text() == 'v1\n'
