"""The storage layer counts its own requests to Cloud Storage, by kind, as the server sees them: checked
against the fault proxy's record of every request that reached the emulator."""
import collections
import os

import pytest

from imgrec.contract import counters
from imgrec.contract.tfrecord import frame, read_records
from imgrec.storage import gcs_storage, request_counts, storage
from imgrec.pipelines import launcher
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.fault_proxy import LIST, READ, faulty_gcs, gcs_emulator  # noqa: F401  (fixtures)


def _counted(before):
    return request_counts.made() - before


def _seen(proxy, first=0):
    """{kind: requests} the proxy answered since ``first``, ranged reads apart, deletes and copies by method."""
    found = collections.Counter()
    for timed in proxy.timeline[first:]:
        if timed.method == 'DELETE':
            found['delete'] += 1
        elif timed.method != 'GET':
            found['copy' if '/rewriteTo/' in timed.path else 'write'] += 1
        elif timed.kind == READ:
            found['ranged' if timed.ranged else 'read'] += 1
        else:
            found[timed.kind] += 1
    return found


@pytest.fixture(scope='module')
def bucket(gcs_emulator):
    return gcs_emulator.create_bucket('request-counts')


def test_each_call_counts_the_requests_the_server_answers(faulty_gcs, bucket, tmp_path):
    store = storage.storage_for(bucket)
    before, first = request_counts.made(), len(faulty_gcs.timeline)
    store.write(f'{bucket}/a/one.bin', b'x' * 1000)
    assert store.read(f'{bucket}/a/one.bin') == b'x' * 1000
    assert store.read_range(f'{bucket}/a/one.bin', 10, 20) == b'x' * 10
    store.copy(f'{bucket}/a/one.bin', f'{bucket}/a/two.bin')
    large = tmp_path / 'large.bin'
    large.write_bytes(b'y' * (request_counts.MULTIPART_LIMIT + 1))  # a resumable upload: more than one request
    store.put_file(str(large), f'{bucket}/a/large.bin')
    store.write_all({f'{bucket}/a/more-{i}.bin': b'z' for i in range(3)})
    # A listing costs a request a page (the emulator answers every listing in one page).
    assert len(list(store.list(f'{bucket}/a'))) == 6
    assert len(list(store.list_level(bucket))) == 1
    assert store.stat(f'{bucket}/a/two.bin').size == 1000
    store.delete(f'{bucket}/a/two.bin')

    counted, seen = _counted(before), _seen(faulty_gcs, first)
    assert counted[counters.WRITES] == seen['write'] == 1 + request_counts.upload_requests(large.stat().st_size) + 3
    assert request_counts.upload_requests(large.stat().st_size) == 2
    assert counted[counters.OBJECT_READS] == seen['read'] == 1
    assert counted[counters.RANGED_READS] == seen['ranged'] == 1
    assert counted[counters.COPIES] == seen['copy'] == 1
    assert counted[counters.LISTS] == seen[LIST] == 2
    assert counted[counters.DELETES] == seen['delete'] == 1
    assert counted[counters.METADATA_READS] == 1  # (the client may also look up the bucket: not counted)
    assert counted[counters.BYTES_UPLOADED] == 1000 + large.stat().st_size + 3
    assert counted[counters.BYTES_DOWNLOADED] == 1000 + 10


def test_a_gcs_build_counts_one_read_per_image_and_every_write_and_listing(faulty_gcs, gcs_emulator, tmp_path):
    local = tmp_path / 'images'
    images = write_images(str(local), 3, **SMALL)
    source = gcs_emulator.create_bucket('counted-in') + '/images'
    gcs_emulator.upload_folder(local, source)
    output = gcs_emulator.create_bucket('counted-out') + '/ds'
    before, first = request_counts.made(), len(faulty_gcs.timeline)
    # Worker processes: their requests reach the job's counters; this process's own are in request_counts.
    _, result = launcher.run(['--input', source, '--output', output, '--image_size', '32', '--version', 'v1',
                                   '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2'])
    workers = counters.read(result, counters.STORAGE_REQUESTS)
    counted = _counted(before) + workers
    seen = _seen(faulty_gcs, first)

    # Every source image is read once, whole, and by a worker.
    source_reads = collections.Counter(timed.name for timed in faulty_gcs.timeline[first:]
                                       if timed.kind == READ and timed.name.startswith('images/'))
    assert sorted(source_reads) == sorted(f"images/{os.path.relpath(path, local).replace(os.sep, '/')}"
                                          for path in images)
    assert set(source_reads.values()) == {1}
    assert workers[counters.OBJECT_READS] >= len(images)
    # Whole-object reads, writes, copies and deletions all go through the storage layer: it counts each.
    assert counted[counters.OBJECT_READS] == seen['read']
    assert counted[counters.WRITES] == seen['write']
    assert counted[counters.COPIES] == seen['copy']
    assert counted[counters.DELETES] == seen['delete']
    # Listing the input: its top level and each of the four class folders, a page each, in the workers.
    input_lists = [timed for timed in faulty_gcs.timeline[first:]
                   if timed.kind == LIST and 'counted-in' in timed.path and 'maxResults=1000' in timed.path]
    assert len(input_lists) >= 1 + 4
    assert workers[counters.LISTS] >= 1 + 4
    assert counted[counters.LISTS] <= seen[LIST]  # Beam's own file system lists too (FileSystems.match)
    assert 0 < counted[counters.RANGED_READS] <= seen['ranged']


def test_an_object_is_streamed_in_ranged_reads_after_one_metadata_request(faulty_gcs, bucket):
    records = [bytes([i]) * (300 + 97 * i) for i in range(12)]
    data = b''.join(frame(record) for record in records)
    store = storage.storage_for(bucket)
    store.write(f'{bucket}/s/shard.tfrecord', data)
    before, first = request_counts.made(), len(faulty_gcs.timeline)
    with gcs_storage.ObjectReader(store, f'{bucket}/s/shard.tfrecord', chunk=1000) as stream:
        assert list(read_records(stream)) == records
        assert stream.read(10) == b''
    counted, seen = _counted(before), _seen(faulty_gcs, first)
    chunks = -(-len(data) // 1000)
    assert counted[counters.RANGED_READS] == seen['ranged'] == chunks
    assert counted[counters.METADATA_READS] == 1
    assert counted[counters.BYTES_DOWNLOADED] == len(data)
    with store.open_read(f'{bucket}/s/shard.tfrecord') as stream:
        assert stream.read(1500) + stream.read() == data
    with pytest.raises(FileNotFoundError):
        store.open_read(f'{bucket}/s/none.tfrecord')
