"""Image bytes travel through files, not the graph: spill files, ranged frame reads, the streaming shard
writer, and what a build leaves behind when it publishes or fails."""
import io
import os
import shutil

import pytest

from imgrec.contract import index, layout
from imgrec.contract.tfrecord import frame, read_records
from imgrec.console.errors import build_failure_message
from imgrec.storage import frames
from imgrec.storage import storage
from imgrec.storage.spill import SpillFile
from tests.conftest import build, listing
from tests.contract_checks import check_index, check_version, load_version
from imgrec.transforms import write
from imgrec.transforms.elements import RecordRef

LOCAL = storage.storage_for('')


def test_nearby_frames_of_a_file_are_fetched_by_one_read():
    refs = [('a', 0, 10), ('a', 10, 5), ('a', 100, 7), ('b', 0, 3), ('a', 5000, 4)]
    reads = frames.plan_reads(refs, gap_of=lambda file: 100, max_read=10_000)
    assert [(f, start, end, len(members)) for f, start, end, members in reads] == [
        ('a', 0, 107, 3), ('a', 5000, 5004, 1), ('b', 0, 3, 1)]
    # No read grows past max_read, however close the frames lie.
    assert [(start, end) for _, start, end, _ in frames.plan_reads(refs[:3], gap_of=lambda f: 100, max_read=20)] == [
        (0, 15), (100, 107)]
    # Local files: only frames that touch are read together.
    assert [(start, end) for _, start, end, _ in frames.plan_reads([('/a', 0, 10), ('/a', 10, 5), ('/a', 16, 1)])] == [
        (0, 15), (16, 17)]


def test_spilled_frames_read_back_by_reference(tmp_path):
    spill = SpillFile(str(tmp_path / 'spill'), LOCAL)
    payloads = [bytes([i]) * (i * 37 + 1) for i in range(40)]
    refs = [spill.append(frame(payload)) for payload in payloads]
    spill.close()
    assert len({ref[0] for ref in refs}) == 1 and [ref[1] for ref in refs] == sorted(ref[1] for ref in refs)
    reader = frames.FrameReader(LOCAL, threads=3)
    try:
        got = reader.read(list(reversed(refs)))
    finally:
        reader.close()
    assert [list(read_records(io.BytesIO(got[ref]))) for ref in refs] == [[payload] for payload in payloads]


class _CountingReader(frames.FrameReader):
    def __init__(self):
        super().__init__(LOCAL)
        self.calls = []

    def read(self, refs):
        self.calls.append(len(refs))
        return super().read(refs)


def _ref(source, payload_ref):
    path, offset, length = payload_ref
    return RecordRef(source=source, path=source, label_text='a', split='train', label=0,
                     sha256='0' * 64, source_size=1, mtime_ns=1, generation=None, decisions=(),
                     payload_file=path, payload_offset=offset, payload_length=length)


def test_the_shard_writer_streams_a_bounded_window_in_order_key_order(tmp_path, monkeypatch):
    spills = [SpillFile(str(tmp_path / 'spill'), LOCAL) for _ in range(3)]  # records scattered over three files
    payloads = {f's{i:02d}': os.urandom(50 + i) for i in range(25)}
    records = [_ref(source, spills[i % 3].append(frame(data)))
               for i, (source, data) in enumerate(payloads.items())]
    for spill in spills:
        spill.close()
    monkeypatch.setattr(write, 'WINDOW_RECORDS', 4)
    reader = _CountingReader()
    size, placed = write.write_shard(str(tmp_path / 'shard.tfrecord'), records, reader, LOCAL)
    assert reader.calls and max(reader.calls) <= 4  # never more than a window of frames in memory
    data = (tmp_path / 'shard.tfrecord').read_bytes()
    assert size == len(data)
    in_order = sorted(records, key=lambda r: r.order_key)
    assert list(read_records(io.BytesIO(data))) == [payloads[r.source] for r in in_order]
    assert [r.source for r, _ in placed] == [r.source for r in in_order]
    for record, offset in placed:  # each placement frames exactly its record
        assert list(read_records(io.BytesIO(data[offset:offset + record.payload_length]))) == [
            payloads[record.source]]


def test_windows_bound_bytes_and_records():
    records = [_ref(f's{i}', ('f', 0, 10)) for i in range(10)]
    assert [len(w) for w in write.windows(records, max_bytes=35, max_records=100)] == [3, 3, 3, 1]
    assert [len(w) for w in write.windows(records, max_bytes=10**6, max_records=4)] == [4, 4, 2]
    big = [_ref('big', ('f', 0, 100))]
    assert [len(w) for w in write.windows(big, max_bytes=10, max_records=4)] == [1]  # a big frame still goes


def test_publishing_removes_the_spill_files_and_staging(sample_images, tmp_path):
    output = build(sample_images, tmp_path / 'out', '--version', 'v1')
    assert listing(output) == [layout.LATEST, 'v1']
    version_dir, document = load_version(output)
    assert not os.path.exists(os.path.join(version_dir, layout.SPILL_DIR))
    rows = check_index(version_dir, document, sample_images)
    # A user finds a record by its source without scanning shards, and reads it with one ranged read.
    wanted = rows[len(rows) // 2]
    row = index.find_record(version_dir, document, wanted[index.SOURCE], lambda path: open(path, 'rb'))
    assert row == wanted
    with open(os.path.join(version_dir, row[index.SHARD]), 'rb') as stream:
        stream.seek(row[index.OFFSET])
        assert len(list(read_records(io.BytesIO(stream.read(row[index.LENGTH]))))) == 1
    assert index.find_record(version_dir, document, 'no/such.jpg', lambda path: open(path, 'rb')) is None


def test_a_failed_build_leaves_its_spill_files_out_of_every_version(sample_images, tmp_path):
    output = build(sample_images, tmp_path / 'out', '--version', 'v1')
    images = tmp_path / 'images'
    shutil.copytree(sample_images, images)
    (images / 'circle' / 'broken.jpg').write_bytes(b'not a JPEG')
    with pytest.raises(Exception) as failure:  # fails at publication, after every Example was spilled
        build(str(images), tmp_path / 'out', '--version', 'v2', '--max_error_rate', '0', '--full')
    assert 'over --max_error_rate' in build_failure_message(failure.value)
    names = listing(output)
    assert (tmp_path / 'out' / layout.LATEST).read_text() == 'v1\n'
    staging = [name for name in names if layout.is_staging_name(name)]
    assert names == sorted([layout.LATEST, 'v1', *staging]) and len(staging) == 1
    assert staging[0].startswith('v2' + layout.STAGING_MARK)
    # Kept whole as the build failed (not for a full disk): the same command again takes its records up.
    assert os.path.exists(os.path.join(output, staging[0], layout.SPILL_DIR))
    assert layout.QUARANTINE_JSONL in os.listdir(os.path.join(output, staging[0]))
    assert not os.path.exists(os.path.join(output, 'v2'))
    assert not os.path.exists(os.path.join(output, 'v1', layout.SPILL_DIR))
    # The next build of that version is not refused: it was never published (--force: nothing changed). Another
    # input, so not the same build: its cleanup gives back the failed one's bulk (tidying.shed).
    build(sample_images, tmp_path / 'out', '--version', 'v2', '--force')
    assert (tmp_path / 'out' / layout.LATEST).read_text() == 'v2\n'
    assert not os.path.exists(os.path.join(output, staging[0], layout.SPILL_DIR))
    assert not os.path.exists(os.path.join(output, 'v2', layout.SPILL_DIR))


def test_a_record_crosses_beam_and_pickle_unchanged():
    from apache_beam.coders import coders  # pylint: disable=import-outside-toplevel
    import copy  # pylint: disable=import-outside-toplevel
    import pickle  # pylint: disable=import-outside-toplevel
    record = RecordRef(source='cats/001.jpg', path='/in/cats/001.jpg', label_text='cats', split='train', label=1,
                       sha256='0f' * 32, source_size=1534, mtime_ns=1733450000123456789, generation=None,
                       decisions=('format=PNG', 'mode=P'), payload_file='/out/spill/a.tfrecord', payload_offset=12,
                       payload_length=1500, perceptual_hash='0123456789abcdef' * 2, source_width=48, source_height=40,
                       upscaled=False, ctime_ns=1733450000123456790, inode=1234567, encoded_sha256='a0' * 32)
    # Packed where it can be (a path ending in its source, a lowercase hex sha256 and hash), as given where not.
    variants = [record, record._replace(perceptual_hash=None, encoded_sha256=None), record._replace(encoded_sha256='A0'), record._replace(perceptual_hash='000000000000000a'), record._replace(perceptual_hash='abc'),
                record._replace(path='gs://bucket/elsewhere.jpg', sha256='0F' * 32, generation=7),
                record._replace(source='', path=''), record._replace(path='cats/001.jpg'),
                record._replace(sha256='abc', perceptual_hash='XYZ', payload_file=None, published_split='train'),
                record._replace(source='chats/été.jpg', path='/in/chats/été.jpg')]
    coder = coders.FastPrimitivesCoder()
    for variant in variants:
        for back in (coder.decode(coder.encode(variant)), pickle.loads(pickle.dumps(variant)),
                     copy.deepcopy(variant)):
            assert back == variant and type(back) is RecordRef
            assert [type(value) for value in back] == [type(value) for value in variant]


def test_shards_and_index_parts_no_record_reaches_are_written_empty():
    assert write._empty_shards(None, {'train': 3, 'validation': 2}, [('train', 1), ['validation', 0]]) == [
        (('train', 0), []), (('train', 2), []), (('validation', 1), [])]
    from imgrec.transforms.write_index import _empty_parts  # pylint: disable=import-outside-toplevel
    written = [{'file': layout.index_file_name(1, 3), 'rows': 5}]
    assert _empty_parts(None, 3, written) == [(0, []), (2, [])]


def test_more_shards_than_records_are_all_written(sample_images, tmp_path):
    output = build(sample_images, tmp_path / 'out', '--num_shards', 'train=70,validation=30')
    document, by_split = check_version(output, sample_images)
    for split, info in document['splits'].items():
        assert info['num_shards'] == len(info['shards']) > len(by_split[split])
        assert sum(shard['records'] == 0 for shard in info['shards']) == info['num_shards'] - len(by_split[split])
