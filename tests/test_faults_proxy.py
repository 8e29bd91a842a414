"""The fault-injecting proxy itself: it passes requests through, and gives each fault where it is asked to."""
import random

import pytest
import requests
from google.api_core import exceptions
from google.cloud import storage

from imgrec.storage import retries
from tests.fault_proxy import (
    FAULTS,
    KINDS,
    LATEST,
    LIST,
    METADATA,
    READ,
    RESET,
    SLOW,
    WRITE,
    FaultProxy,
    faulty_gcs,  # noqa: F401  (fixtures)
    gcs_emulator,
    object_name,
    request_kind,
)


@pytest.fixture(scope='module')
def bucket(gcs_emulator):
    name = gcs_emulator.create_bucket('proxy-tests')
    gcs_emulator.upload_bytes(f'{name}/data/a.bin', bytes(range(256)) * 64)
    return name[len('gs://'):]


def _client():
    """A client made now, so it talks to STORAGE_EMULATOR_HOST: the proxy."""
    return storage.Client.create_anonymous_client()


def _read(client, bucket, name='data/a.bin', timeout=60):
    return client.bucket(bucket).blob(name).download_as_bytes(retry=None, timeout=timeout)


def _upload(client, bucket, name, data):
    client.bucket(bucket).blob(name).upload_from_string(data, retry=None)


def _list(client, bucket, prefix='data/'):
    return [blob.name for blob in client.list_blobs(bucket, prefix=prefix, retry=None)]


def test_without_faults_requests_pass_through_and_are_sorted_by_kind(faulty_gcs, gcs_emulator, bucket):
    client = _client()
    assert _read(client, bucket) == bytes(range(256)) * 64
    _upload(client, bucket, 'out/v1/dataset.json', b'{}')
    _upload(client, bucket, 'out/LATEST', b'v1\n')
    assert _list(client, bucket, 'out/') == ['out/LATEST', 'out/v1/dataset.json']
    assert gcs_emulator.read_bytes(f'gs://{bucket}/out/LATEST') == b'v1\n'
    # (The client may also look up the bucket's metadata first.)
    assert {kind: faulty_gcs.requests[kind] for kind in (READ, WRITE, LATEST, LIST)} == {
        READ: 1, WRITE: 1, LATEST: 1, LIST: 1}
    assert not faulty_gcs.injected


@pytest.mark.parametrize('fault, error', [('503', exceptions.ServiceUnavailable), ('429', exceptions.TooManyRequests)])
def test_error_statuses_on_the_chosen_kind_only(faulty_gcs, bucket, fault, error):
    faulty_gcs.configure(rate=1.0, kinds=[READ], faults=[fault])
    client = _client()
    with pytest.raises(error) as raised:
        _read(client, bucket)
    assert retries.is_transient(raised.value)
    assert _list(client, bucket) == ['data/a.bin']  # listing is not a chosen kind
    assert dict(faulty_gcs.injected) == {(READ, fault): 1}


def test_a_reset_mid_body_breaks_a_read(faulty_gcs, bucket):
    faulty_gcs.configure(rate=1.0, kinds=[READ], faults=[RESET])
    with pytest.raises(Exception) as raised:
        _read(_client(), bucket)
    assert retries.is_transient(raised.value), repr(raised.value)
    assert dict(faulty_gcs.injected) == {(READ, RESET): 1}


def test_a_reset_upload_is_stored_though_the_client_sees_an_error(faulty_gcs, gcs_emulator, bucket):
    faulty_gcs.configure(rate=1.0, kinds=[WRITE], faults=[RESET])
    with pytest.raises(Exception) as raised:
        _upload(_client(), bucket, 'reset/shard', b'shard bytes')
    assert retries.is_transient(raised.value), repr(raised.value)
    assert gcs_emulator.read_bytes(f'gs://{bucket}/reset/shard') == b'shard bytes'


def test_faults_on_the_latest_update_only(faulty_gcs, gcs_emulator, bucket):
    faulty_gcs.configure(rate=1.0, kinds=[LATEST], faults=['503'])
    client = _client()
    _upload(client, bucket, 'latest/v1/dataset.json', b'{}')
    with pytest.raises(exceptions.ServiceUnavailable):
        _upload(client, bucket, 'latest/LATEST', b'v1\n')
    assert gcs_emulator.list(f'gs://{bucket}/latest/') == [f'gs://{bucket}/latest/v1/dataset.json']


def test_a_slow_answer_outlasts_a_shorter_client_timeout(faulty_gcs, bucket):
    faulty_gcs.configure(rate=1.0, kinds=[READ], faults=[SLOW], slow_s=3)
    with pytest.raises(requests.Timeout):
        _read(_client(), bucket, timeout=0.3)
    faulty_gcs.configure(slow_s=0.1)
    assert _read(_client(), bucket) == bytes(range(256)) * 64  # slow, then whole
    assert faulty_gcs.injected[READ, SLOW] == 2


def test_an_outage_fails_every_chosen_request_until_it_ends(faulty_gcs, bucket):
    client = _client()
    faulty_gcs.outage(600, kinds=[READ, LIST])
    for attempt in range(3):
        with pytest.raises(exceptions.ServiceUnavailable):
            _read(client, bucket)
    with pytest.raises(exceptions.ServiceUnavailable):
        _list(client, bucket)
    _upload(client, bucket, 'outage/ok', b'writes still work')
    faulty_gcs.outage(0)
    assert _read(client, bucket) == bytes(range(256)) * 64


def _pattern(proxy, keys):
    return {key: proxy.choose_fault('GET', f'/download/storage/v1/b/b/o/{key}?alt=media', '')[1] for key in keys}


def test_faults_depend_on_the_seed_and_the_request_not_on_the_order():
    keys = [f'img{i}.jpg' for i in range(400)]
    first = _pattern(FaultProxy('http://127.0.0.1:1', rate=0.2, seed=7), keys)
    shuffled = list(keys)
    random.Random(1).shuffle(shuffled)
    assert _pattern(FaultProxy('http://127.0.0.1:1', rate=0.2, seed=7), shuffled) == first
    assert _pattern(FaultProxy('http://127.0.0.1:1', rate=0.2, seed=8), keys) != first
    faults = [fault for fault in first.values() if fault]
    assert 40 < len(faults) < 120  # about 20% of 400
    assert set(faults) == set(FAULTS)
    # A retry of the same request is a new draw: it may succeed.
    proxy = FaultProxy('http://127.0.0.1:1', rate=0.2, seed=7)
    _pattern(proxy, keys)
    second = _pattern(proxy, keys)
    assert second != first and sum(1 for key in keys if first[key] and second[key]) < len(faults)


@pytest.mark.parametrize('method, path, body, kind, name', [
    ('GET', '/download/storage/v1/b/b/o/in%2Fcat%2Fa.jpg?alt=media', b'', READ, 'in/cat/a.jpg'),
    ('GET', '/storage/v1/b/b/o/in%2Fcat%2Fa.jpg?alt=media', b'', READ, 'in/cat/a.jpg'),
    ('GET', '/storage/v1/b/b/o?prefix=in%2F&delimiter=%2F', b'', LIST, ''),
    ('GET', '/storage/v1/b/b/o/in%2Fa.jpg', b'', METADATA, 'in/a.jpg'),
    ('GET', '/storage/v1/b/b', b'', METADATA, ''),
    ('POST', '/upload/storage/v1/b/b/o?uploadType=multipart',
     b'--x\r\ncontent-type: application/json\r\n\r\n{"name": "out/v1/train-00000-of-00002.tfrecord"}\r\n--x', WRITE,
     'out/v1/train-00000-of-00002.tfrecord'),
    ('POST', '/upload/storage/v1/b/b/o?uploadType=multipart', b'{"name": "out/LATEST"}', LATEST, 'out/LATEST'),
    ('POST', '/upload/storage/v1/b/b/o?uploadType=resumable&name=out%2FLATEST', b'', LATEST, 'out/LATEST'),
    ('DELETE', '/storage/v1/b/b/o/out%2FLATEST.tmp', b'', LATEST, 'out/LATEST.tmp'),
    ('DELETE', '/storage/v1/b/b/o/out%2Fv1%2Fprobe', b'', WRITE, 'out/v1/probe'),
])
def test_requests_are_sorted_into_kinds(method, path, body, kind, name):
    assert object_name(method, path, body) == name
    assert request_kind(method, path, name) == kind


def test_unknown_kinds_and_faults_are_refused():
    with pytest.raises(ValueError, match='unknown request kind'):
        FaultProxy('http://127.0.0.1:1', kinds=['reads'])
    with pytest.raises(ValueError, match='unknown fault'):
        FaultProxy('http://127.0.0.1:1', faults=['500'])
    assert set(KINDS) == {READ, LIST, METADATA, WRITE, LATEST}
