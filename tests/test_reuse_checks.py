"""A refresh checks every frame it copies from the previous version: a damaged, swapped, truncated or
missing previous shard never reaches the new version. Those images are decoded again from their sources
(counted as ``reuse_damaged``), and the new version is what a full build makes. And the local stamp
(size, mtime, ctime, inode) notices bytes changed under the same size and modification time."""
import hashlib
import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from imgrec.contract import index as I, layout
from imgrec.contract.tfrecord import frame
from imgrec.console.errors import BuildFailed
from imgrec.imaging.record_options import RecordOptions
from imgrec.storage import storage
from imgrec.versions import verify
from imgrec.pipelines import build_dataset
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import check_version, load_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)
from imgrec.transforms.elements import RecordRef
from imgrec.transforms.previous import ReuseCheck

OPTIONS = ('--image_size', '32', '--splits', 'train=80,validation=20', '--num_shards', 'train=2,validation=1',
           '--direct_running_mode', 'in_memory')
SHARD = 'train-00000-of-00002.tfrecord'


def _build(images, output, *extra):
    return build_dataset.main(['--input', str(images), '--output', str(output), *OPTIONS, *extra])


def _files(version_dir):
    """{relative path: bytes} of a version, less the files that name the run (its time, its refresh)."""
    return {os.path.relpath(os.path.join(folder, name), version_dir): open(os.path.join(folder, name), 'rb').read()
            for folder, _, names in os.walk(version_dir) for name in names
            if name not in (layout.DATASET_JSON, layout.REPORT_HTML, layout.REPORT_STATE_JSON)}


def _rows(version_dir):
    return [row for name in sorted(os.listdir(os.path.join(version_dir, layout.INDEX_DIR)))
            for row in pq.read_table(os.path.join(version_dir, layout.INDEX_DIR, name)).to_pylist()]


@pytest.fixture(scope='module')
def published(tmp_path_factory):
    """(input, output with v1, another output's v1 built from other images, a --full build of the input
    with one image added: what the refresh must publish)."""
    root = tmp_path_factory.mktemp('reuse')
    images, other_images = root / 'images', root / 'other-images'
    write_images(str(images), 6, png_every=4, **SMALL)
    write_images(str(other_images), 6, seed=5, png_every=3, **SMALL)
    assert _build(images, root / 'out', '--version', 'v1') == 0
    assert _build(other_images, root / 'other', '--version', 'v1') == 0
    # One new image, so the refresh publishes (a refresh with nothing new copies nothing).
    write_images(str(root / 'new'), 1, seed=9, classes=('circle',), png_every=0, **SMALL)
    shutil.move(str(next((root / 'new' / 'circle').iterdir())), str(images / 'circle' / 'zz_new.jpg'))
    assert _build(images, root / 'full', '--version', 'v2', '--full') == 0
    return images, root / 'out', root / 'other', root / 'full'


def _flip_a_byte(shard, rows):
    """Flips one byte in the middle of the first record's Example: only its data checksum notices."""
    first = min(rows, key=lambda row: row[I.OFFSET])
    data = bytearray(shard.read_bytes())
    data[first[I.OFFSET] + 12 + (first[I.LENGTH] - 16) // 2] ^= 0x40
    shard.write_bytes(bytes(data))
    return 1


def _swap(other):
    def damage(shard, rows):
        shutil.copyfile(other / 'v1' / SHARD, shard)  # well-framed records, of other images
        return len(rows)
    return damage


def _truncate(shard, rows):
    size = shard.stat().st_size // 2
    with open(shard, 'r+b') as stream:
        stream.truncate(size)
    return sum(1 for row in rows if row[I.OFFSET] + row[I.LENGTH] > size)


def _remove(shard, rows):
    shard.unlink()
    return len(rows)


@pytest.mark.parametrize('damage', ['flipped byte', 'swapped shard', 'truncated shard', 'missing shard'])
def test_a_damaged_previous_shard_is_decoded_again_never_copied(published, tmp_path, capsys, damage):
    images, built, other, full = published
    output = tmp_path / 'out'
    shutil.copytree(built, output)
    shard = output / 'v1' / SHARD
    rows = [row for row in _rows(output / 'v1') if row[I.SHARD] == SHARD]
    assert rows
    damaged = {'flipped byte': _flip_a_byte, 'swapped shard': _swap(other), 'truncated shard': _truncate,
               'missing shard': _remove}[damage](shard, rows)
    assert damaged >= 1

    assert _build(images, output, '--version', 'v2') == 0
    out, err = capsys.readouterr()
    assert f'{damaged} damaged in v1' in out and 'Traceback' not in err
    version_dir, document = load_version(str(output))
    assert document['version'] == 'v2'
    refresh = document['refresh']
    assert refresh['mode'] == 'incremental' and refresh['reuse_damaged'] == damaged
    assert refresh['decoded'] == 1 + damaged  # the new image, and the damaged ones
    # The new version holds what a full build of the same input holds, byte for byte, and verifies.
    assert _files(version_dir) == _files(full / 'v2')
    check_version(str(output), input_root=str(images))
    assert verify.main([str(output)]) == 0


def _record(source_path, source, sha256):
    return RecordRef(source=source, path=str(source_path), label_text='circle', split='train', label=0,
                     sha256=sha256, source_size=source_path.stat().st_size, mtime_ns=None, generation=None,
                     decisions=(), payload_file='/prev/v1/' + SHARD, payload_offset=0, payload_length=0)


def test_the_check_names_what_is_wrong_and_refuses_a_source_whose_bytes_changed(published):
    images, built, _, _ = published
    rows = {row[I.SOURCE]: row for row in _rows(built / 'v1')}
    source = next(iter(sorted(rows)))
    row, path = rows[source], images / source
    check = ReuseCheck(str(built / 'v1'), RecordOptions((32, 32)), storage.storage_for(str(built)))
    with open(built / 'v1' / row[I.SHARD], 'rb') as stream:
        stream.seek(row[I.OFFSET])
        good = stream.read(row[I.LENGTH])
    record = _record(path, source, row[I.SHA256])._replace(label=row[I.LABEL],
                                                             label_text=source.split('/')[0])
    assert check.problem(record, good) is None
    # Made again from the source, the frame is the one the previous version holds.
    assert check.decoded_again(record, 'a test') == good
    assert 'checksum' in check.problem(record, good[:-1] + bytes([good[-1] ^ 1]))
    assert 'sha256' in check.problem(record._replace(sha256='0' * 64), good)
    assert 'cannot read it: FileNotFoundError' in check.problem(record, FileNotFoundError('gone'))
    # A well-framed record of another source: its Example names another source and sha256.
    assert 'image/source' in check.problem(record, frame(b'\x0a\x00'))
    # The source's bytes are not those the record was made of: no silent substitute, one line.
    with pytest.raises(BuildFailed, match='its bytes changed since the previous version.*--full'):
        check.decoded_again(record._replace(sha256=hashlib.sha256(b'other').hexdigest()), 'damaged')


def _smaller_image(tmp_path, size):
    """The bytes of a new JPEG of at most ``size`` bytes."""
    for seed in range(100, 200):
        (path,) = write_images(str(tmp_path / f'new-{seed}'), 1, seed=seed, classes=('square',), png_every=0, **SMALL)
        data = open(path, 'rb').read()
        if len(data) <= size:
            return data
    raise AssertionError(f'no generated image of at most {size} bytes')


def test_bytes_changed_under_the_same_size_and_mtime_are_decoded_again(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 4, png_every=0, **SMALL)
    output = tmp_path / 'out'
    assert _build(images, output, '--version', 'v1') == 0
    # Other bytes of the same size, then the modification time set back: what `touch -r`, a restore tool
    # or a camera import leaves. Only the inode change time (and here, the inode) tells.
    victim = sorted((images / 'square').iterdir())[0]
    before = victim.stat()
    data = _smaller_image(tmp_path, before.st_size).ljust(before.st_size, b'\0')  # read up to its end marker
    victim.write_bytes(data)
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = victim.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    assert _build(images, output, '--version', 'v2') == 0
    version_dir, document = load_version(str(output))
    assert document['refresh']['changed'] == 1 and document['refresh']['decoded'] == 1
    source = f'square/{victim.name}'
    (row,) = [row for row in _rows(version_dir) if row[I.SOURCE] == source]
    assert row[I.SHA256] == hashlib.sha256(data).hexdigest()  # the new bytes, not the old pixels
    check_version(str(output), input_root=str(images))


def _object_files(emulator, version_dir):
    prefix = version_dir + '/'
    return {url[len(prefix):]: emulator.read_bytes(url) for url in emulator.list(prefix)
            if not url.endswith((layout.DATASET_JSON, layout.REPORT_HTML, layout.REPORT_STATE_JSON))}


def test_a_truncated_and_a_missing_previous_shard_on_gcs_are_decoded_again(published, gcs_emulator, tmp_path):
    images = tmp_path / 'images'
    shutil.copytree(published[0], images)
    output = gcs_emulator.create_bucket('reuse-checks') + '/ds'
    (images / 'circle' / 'zz_new.jpg').rename(tmp_path / 'zz_new.jpg')
    assert _build(images, output, '--version', 'v1') == 0
    rows = _rows(gcs_emulator.download_folder(f'{output}/v1', tmp_path / 'v1'))
    # One shard cut short, another gone: a ranged read past an object's end, and a 404.
    truncated, missing = SHARD, layout.shard_file_name('validation', 0, 1)
    data = gcs_emulator.read_bytes(f'{output}/v1/{truncated}')
    gcs_emulator.upload_bytes(f'{output}/v1/{truncated}', data[:len(data) // 2])
    gcs_emulator.client.bucket('reuse-checks').blob(f'ds/v1/{missing}').delete()
    damaged = sum(1 for row in rows if row[I.SHARD] == missing
                  or row[I.SHARD] == truncated and row[I.OFFSET] + row[I.LENGTH] > len(data) // 2)

    (tmp_path / 'zz_new.jpg').rename(images / 'circle' / 'zz_new.jpg')
    assert _build(images, output, '--version', 'v2') == 0
    refresh = json.loads(gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}'))['refresh']
    assert refresh['mode'] == 'incremental' and refresh['reuse_damaged'] == damaged > 1
    full = 'gs://reuse-checks/full'  # of the same files (their stamps are in the index)
    assert _build(images, full, '--version', 'v2', '--full') == 0
    assert _object_files(gcs_emulator, f'{output}/v2') == _object_files(gcs_emulator, f'{full}/v2')
