"""A refresh on gs:// (a real GCS server): only new and changed objects are downloaded, the result is
byte-identical to a full build, and LATEST is replaced under a generation precondition."""
import json
import urllib.parse

from imgrec.contract import layout
from imgrec.pipelines import build_result, launcher, summary
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.fault_proxy import faulty_gcs  # noqa: F401  (the fixture)
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--splits', 'train=80,validation=20',
           '--num_shards', 'train=2,validation=1')


def _build(source, output, *extra):
    return launcher.run(['--input', source, '--output', output, *OPTIONS, *extra])


def _downloads(log, prefix):
    """Object names under ``prefix`` whose bytes were downloaded (GET with alt=media)."""
    return sorted(name for method, path, name in log
                  if method == 'GET' and 'alt=media' in urllib.parse.urlsplit(path).query and name.startswith(prefix))


def _version_files(emulator, version_dir):
    prefix = version_dir + '/'
    return {url[len(prefix):]: emulator.read_bytes(url) for url in emulator.list(prefix)
            if not url.endswith((layout.DATASET_JSON, layout.REPORT_HTML, layout.REPORT_STATE_JSON,
                                 layout.TFDS_DATASET_INFO))}


def test_a_gcs_refresh_reads_only_what_changed_and_matches_a_full_build(gcs_emulator, faulty_gcs, tmp_path):
    local = tmp_path / 'images'
    write_images(str(local), 5, png_every=3, **SMALL)
    bucket = gcs_emulator.create_bucket('refresh-in')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    output = gcs_emulator.create_bucket('refresh-out') + '/ds'
    _build(f'{bucket}/images', output, '--version', 'v1')
    latest_before = gcs_emulator.client.bucket('refresh-out').get_blob(f'ds/{layout.LATEST}').generation

    fresh = tmp_path / 'fresh'
    write_images(str(fresh), 2, classes=('circle', 'cross'), seed=99, png_every=0, **SMALL)
    gcs_emulator.upload_bytes(f'{bucket}/images/circle/new.jpg', (fresh / 'circle' / 'circle_00000.jpg').read_bytes())
    gcs_emulator.upload_bytes(f'{bucket}/images/zebra/z.jpg', (fresh / 'cross' / 'cross_00000.jpg').read_bytes())
    # Rewritten in place: a new generation, though the name stays.
    gcs_emulator.upload_bytes(f'{bucket}/images/square/square_00001.jpg',
                              (fresh / 'circle' / 'circle_00001.jpg').read_bytes())
    gcs_emulator.client.bucket('refresh-in').blob('images/cross/cross_00001.jpg').delete()

    faulty_gcs.log.clear()
    config, result = _build(f'{bucket}/images', output, '--version', 'v2')
    assert _downloads(faulty_gcs.log, 'images/') == ['images/circle/new.jpg', 'images/square/square_00001.jpg',
                                                       'images/zebra/z.jpg']
    assert summary.counter(result, 'images_decoded') == 3
    document = json.loads(gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}'))
    assert {key: document['refresh'][key] for key in ('new', 'changed', 'removed', 'decoded')} == {
        'new': 2, 'changed': 1, 'removed': 1, 'decoded': 3}
    assert document['labels'][-1] == 'zebra' and document['labels'][:-1] == sorted(document['labels'][:-1])
    # LATEST was written only if it still was the generation read when the build started.
    latest_writes = [urllib.parse.parse_qs(urllib.parse.urlsplit(path).query) for method, path, name in faulty_gcs.log
                     if method == 'POST' and name == f'ds/{layout.LATEST}']
    assert latest_writes and all(q.get("ifGenerationMatch") == [str(latest_before)] for q in latest_writes), [
        (m, p) for m, p, n in faulty_gcs.log if n == f"ds/{layout.LATEST}"]
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v2\n'

    labels = f'{bucket}/labels.txt'
    gcs_emulator.upload_bytes(labels, ''.join(f'{label}\n' for label in document['labels']).encode())
    full = gcs_emulator.create_bucket('refresh-full') + '/ds'
    _build(f'{bucket}/images', full, '--version', 'v2', '--labels', labels)
    assert _version_files(gcs_emulator, f'{output}/v2') == _version_files(gcs_emulator, f'{full}/v2')
    # No staging objects or spill files are left in the bucket.
    assert not [url for url in gcs_emulator.list(output + '/') if layout.STAGING_MARK in url]


def test_a_gcs_refresh_that_changes_nothing_is_decided_from_the_listing_and_downloads_no_image(
        gcs_emulator, faulty_gcs, tmp_path):
    local = tmp_path / 'images'
    write_images(str(local), 3, **SMALL)
    bucket = gcs_emulator.create_bucket('noop-in')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    output = gcs_emulator.create_bucket('noop-out') + '/ds'
    _build(f'{bucket}/images', output, '--version', 'v1')
    faulty_gcs.log.clear()
    _, result = _build(f'{bucket}/images', output, '--version', 'v2')
    assert isinstance(result, build_result.NothingChanged)
    assert _downloads(faulty_gcs.log, 'images/') == []
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v1\n'
    # A new generation of one object with the same bytes (uploaded again) is no change: that object alone is
    # downloaded, to hash it.
    data = (local / 'circle' / 'circle_00000.jpg').read_bytes()
    gcs_emulator.upload_bytes(f'{bucket}/images/circle/circle_00000.jpg', data)
    faulty_gcs.log.clear()
    _, result = _build(f'{bucket}/images', output, '--version', 'v2')
    assert isinstance(result, build_result.NothingChanged)
    assert _downloads(faulty_gcs.log, 'images/') == ['images/circle/circle_00000.jpg']
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v1\n'
    # Another generation, under the same name and size, with other bytes, is a change.
    gcs_emulator.upload_bytes(f'{bucket}/images/circle/circle_00000.jpg', data[:-1] + bytes([data[-1] ^ 1]))
    _, result = _build(f'{bucket}/images', output, '--version', 'v2', '--max_error_rate', '1')  # (no JPEG end)
    assert not isinstance(result, build_result.NothingChanged)
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v2\n'
