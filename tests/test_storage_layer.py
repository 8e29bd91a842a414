"""The storage layer's one interface, run alike on local folders and on gs:// against the real emulator."""
import pickle
import uuid

import pytest
from google.api_core import exceptions as api_exceptions

from imgrec.console.errors import BuildFailed
from imgrec.storage import gcs_storage, retries, storage
from imgrec.storage.byte_ranges import TruncatedRead
from imgrec.storage.local_storage import LocalStorage
from imgrec.storage.tf_storage import TensorFlowStorage
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (fixture)

QUICK = retries.RetryPolicy(deadline_s=2.0, initial_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(scope='module')
def bucket(gcs_emulator):
    return gcs_emulator.create_bucket('storage-layer')


@pytest.fixture(params=['local', 'gcs', 'ram'])
def root(request, tmp_path):
    """A fresh folder: local, a fresh prefix of the emulator's bucket, or of TensorFlow's ram:// file system."""
    if request.param == 'local':
        return str(tmp_path / 'root')
    if request.param == 'ram':
        return f'ram://storage-layer/{uuid.uuid4().hex[:8]}'
    return f"{request.getfixturevalue('bucket')}/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(root):
    return storage.storage_for(root, QUICK)


def _missing(error):
    return isinstance(error, (FileNotFoundError, api_exceptions.NotFound))


def test_the_scheme_picks_the_implementation(tmp_path):
    assert isinstance(storage.storage_for(str(tmp_path)), LocalStorage)
    assert isinstance(storage.storage_for('relative/path'), LocalStorage)
    assert isinstance(storage.storage_for('gs://bucket/x'), gcs_storage.GcsStorage)
    assert isinstance(storage.storage_for('ram://x'), TensorFlowStorage)


def test_each_storage_says_what_it_is():
    """What callers ask instead of a path's scheme: round trips, reach from cloud workers, '..' resolved."""
    said = {path: (files.remote, files.reachable_by_cloud_workers, files.resolves_relative_links)
            for path, files in ((path, storage.storage_for(path)) for path in ('/tmp/x', 'gs://bucket/x', 'ram://x'))}
    assert said == {'/tmp/x': (False, False, True), 'gs://bucket/x': (True, True, False),
                    'ram://x': (False, False, False)}


def test_a_storage_object_owns_its_retry_policy_and_survives_pickling(root):
    store = storage.storage_for(root, QUICK)
    assert store.retry == QUICK
    assert storage.storage_for(root).retry == retries.default_policy()
    again = pickle.loads(pickle.dumps(store))
    assert again.retry == QUICK and type(again) is type(store)
    assert isinstance(again, storage.Storage)


def test_write_then_read_whole_and_ranged(store, root):
    path = f'{root}/a/b/one.bin'  # local parent folders are made
    store.write(path, b'0123456789')
    assert store.read(path) == b'0123456789'
    assert store.read_range(path, 2, 5) == b'234'
    with pytest.raises(TruncatedRead, match='ends at 10, before byte 12'):
        store.read_range(path, 8, 12)
    with pytest.raises(Exception) as missing:
        store.read(f'{root}/a/none.bin')
    assert _missing(missing.value)


def test_stat_exists_and_versioned_reads_agree_on_the_generation(store, root):
    path = f'{root}/x.json'
    assert store.stat(path) is None and not store.exists(path) and store.read_versioned(path) is None
    generation = store.write(path, b'{}')
    entry = store.stat(path)
    assert store.exists(path) and entry.size == 2 and entry.generation == generation and entry.path == path
    assert store.read_versioned(path) == storage.Versioned(b'{}', generation)
    if not isinstance(store, TensorFlowStorage):  # ram:// keeps no modification time to tell them apart
        assert store.write(path, b'{"a": 1}') != generation


def test_create_only_writes_once(store, root):
    path = f'{root}/lease.json'
    first = store.write(path, b'mine', if_generation=0)
    with pytest.raises(storage.Conflict):
        store.write(path, b'theirs', if_generation=0)
    assert store.read(path) == b'mine'
    # An attempt that landed but whose answer was lost, tried again: it finds its own bytes there.
    assert store.write(path, b'mine', if_generation=0) == first


@pytest.mark.parametrize('root', ['local', 'gcs'], indirect=True)  # ram:// keeps no time to tell generations by
def test_a_generation_precondition_refuses_a_changed_file(store, root):
    path = f'{root}/LATEST'
    store.write(f'{root}/.keep', b'')  # the folder, to lock
    with store.locked(root):
        seen = store.write(path, b'v1\n')
        moved = store.write(path, b'v2\n', if_generation=seen)
        with pytest.raises(storage.Conflict):
            store.write(path, b'v3\n', if_generation=seen)
        assert store.read_versioned(path) == storage.Versioned(b'v2\n', moved)


def test_listings_at_any_depth_and_one_level(store, root):
    store.write_all({f'{root}/b/2.bin': b'22', f'{root}/a.bin': b'1', f'{root}/b/c/3.bin': b'333',
                     f'{root}x/outside.bin': b'not below root'})
    assert sorted((entry.path, entry.size) for entry in store.list(root)) == [
        (f'{root}/a.bin', 1), (f'{root}/b/2.bin', 2), (f'{root}/b/c/3.bin', 3)]
    level = sorted((entry.path, entry.is_folder) for entry in store.list_level(root))
    assert level == [(f'{root}/a.bin', False), (f'{root}/b', True)]
    assert list(store.list(f'{root}/nothing')) == [] and list(store.list_level(f'{root}/nothing')) == []


def test_copy_delete_and_delete_tree(store, root):
    store.write(f'{root}/v/a.bin', b'a')
    store.write(f'{root}/v/sub/b.bin', b'b')
    store.copy(f'{root}/v/a.bin', f'{root}/w/a.bin')
    assert store.read(f'{root}/w/a.bin') == b'a'
    store.delete(f'{root}/w/a.bin')
    store.delete(f'{root}/w/a.bin')  # already gone: done
    assert not store.exists(f'{root}/w/a.bin')
    store.delete_tree(f'{root}/v')
    store.delete_tree(f'{root}/v')
    assert list(store.list(root)) == []


def test_a_failed_copy_is_one_line_naming_both_files(store, root):
    with pytest.raises(BuildFailed, match=f'cannot copy {root}/none.bin to {root}/t.bin: '):
        store.copy(f'{root}/none.bin', f'{root}/t.bin')


def test_streamed_writes_appear_whole_on_close_and_not_when_the_block_fails(store, root):
    path = f'{root}/s/shard.bin'
    with store.open_write(path) as stream:
        for _ in range(3):
            stream.write(b'abc')
    with store.open_read(path) as stream:
        assert stream.read(4) == b'abca' and stream.tell() == 4
        assert stream.read() == b'bcabc' and stream.read() == b'' and stream.tell() == 9
    store.write(f'{root}/s/lines.jsonl', b'{"a": 1}\n\n{"b": 2}')
    with store.open_read(f'{root}/s/lines.jsonl') as stream:
        assert list(stream) == [b'{"a": 1}\n', b'\n', b'{"b": 2}']
    failed = f'{root}/s/failed.bin'
    with pytest.raises(RuntimeError):
        with store.open_write(failed) as stream:
            stream.write(b'part')
            raise RuntimeError('the bundle failed')
    if not isinstance(store, LocalStorage):  # a local file keeps its part, in a staging folder
        assert not store.exists(failed)


def test_gcs_streamed_reads_go_in_chunks(bucket):
    store = storage.storage_for(bucket, QUICK)
    url = f'{bucket}/chunks/{uuid.uuid4().hex[:8]}.bin'
    data = bytes(range(256)) * 40
    store.write(url, data)
    with gcs_storage.ObjectReader(store, url, chunk=1000) as stream:
        assert b''.join(iter(lambda: stream.read(333), b'')) == data
    lines = [b'x' * n + b'\n' for n in range(0, 2500, 250)]  # lines across chunks
    store.write(url, b''.join(lines))
    with gcs_storage.ObjectReader(store, url, chunk=1000) as stream:
        assert list(stream) == lines
