"""Reads a built version back with TensorFlow's own parser and checks it against the contract.

Shared by the local, gs:// and quarantine tests: ``check_version`` asserts everything that must hold
for any build, and returns the parsed records so a test can assert more.
"""
import collections
import hashlib
import io
import json
import os

import pyarrow.parquet as pq
import tensorflow as tf
from PIL import Image

from imgrec.contract import features as F, index as I, layout, metadata
from imgrec.contract.tfrecord import read_records
from imgrec.versions import tfds_metadata
from imgrec.training.example_parsing import parse_example


def read_shard(path):
    """The parsed records of one shard file, in file order: dicts of Python values."""
    records = []
    for serialised in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(serialised.numpy())
        # Our writer's bytes are exactly protobuf's deterministic serialisation.
        assert example.SerializeToString(deterministic=True) == serialised.numpy()
        parsed = parse_example(serialised)
        records.append({key: value.numpy() for key, value in parsed.items()})
    return records


def load_version(output):
    """(version folder, dataset.json document) of the version LATEST names."""
    with open(os.path.join(output, layout.LATEST)) as stream:
        version = stream.read().strip()
    version_dir = os.path.join(output, version)
    with open(os.path.join(version_dir, layout.DATASET_JSON)) as stream:
        return version_dir, metadata.loads(stream.read())


def check_version(output, input_root=None, image_size=None):
    """Asserts the contract on ``output``'s latest version; returns (document, {split: [records]}).

    With ``input_root``, also checks each record against its source file (class folder, sha256).
    """
    version_dir, document = load_version(output)
    labels = open(os.path.join(version_dir, layout.LABELS_TXT)).read().splitlines()
    assert labels == document['labels']
    assert document['features'] == F.FEATURES
    height, width, channels = metadata.image_shape(document)
    if image_size is not None:
        assert (height, width) == tuple(image_size)
    expected_files = {layout.DATASET_JSON, layout.LABELS_TXT, layout.QUARANTINE_JSONL, layout.DUPLICATES_JSONL,
                      layout.NEAR_DUPLICATES_JSONL, layout.REPORT_HTML, layout.REPORT_STATE_JSON,
                      *tfds_metadata.files(document)}
    by_split = {}
    for split, info in document['splits'].items():
        records, class_counts = [], collections.Counter()
        assert info['num_shards'] == len(info['shards'])
        for index, shard in enumerate(info['shards']):
            assert shard['file'] == layout.shard_file_name(split, index, info['num_shards'])
            path = os.path.join(version_dir, shard['file'])
            expected_files.add(shard['file'])
            assert os.path.getsize(path) == shard['bytes']
            shard_records = read_shard(path)
            assert len(shard_records) == shard['records']
            for record in shard_records:
                record['shard'] = index
                class_counts[record[F.LABEL_TEXT].decode()] += 1
            records.extend(shard_records)
        expected_files.update(entry['file'] for entry in metadata.array_record_shards(document, split))
        assert info['num_examples'] == len(records)
        assert info['class_counts'] == {label: class_counts.get(label, 0) for label in labels}
        by_split[split] = records
    assert set(os.listdir(version_dir)) == expected_files | {layout.INDEX_DIR}
    check_index(version_dir, document, input_root)
    for record in (r for records in by_split.values() for r in records):
        assert record[F.IMAGE_FORMAT] == F.IMAGE_FORMAT_JPEG
        assert (record[F.IMAGE_HEIGHT], record[F.IMAGE_WIDTH], record[F.IMAGE_CHANNELS]) == (height, width, channels)
        decoded = Image.open(io.BytesIO(record[F.IMAGE_ENCODED]))
        assert decoded.format == 'JPEG' and decoded.mode == 'RGB' and decoded.size == (width, height)
        assert labels[record[F.LABEL]] == record[F.LABEL_TEXT].decode()
        if input_root is not None:
            source = record[F.SOURCE].decode()
            assert source.split('/', 1)[0] == record[F.LABEL_TEXT].decode()
            with open(os.path.join(input_root, source), 'rb') as stream:
                assert record[F.SHA256].decode() == hashlib.sha256(stream.read()).hexdigest()
    written = sum(len(records) for records in by_split.values())
    assert document['counts']['written'] == written
    with open(os.path.join(version_dir, layout.QUARANTINE_JSONL)) as stream:
        quarantined = [json.loads(line) for line in stream]
    assert document['counts']['quarantined'] == len(quarantined)
    return document, by_split


def check_index(version_dir, document, input_root=None):
    """Every written record has exactly one index row, in the part its source hashes to, and each row's
    offset and length frame exactly that record in its shard (read with one ranged read)."""
    files = document['index']['files']
    assert files == [layout.index_file_name(i, len(files)) for i in range(len(files))]
    assert set(os.listdir(os.path.join(version_dir, layout.INDEX_DIR))) == {f.split('/')[1] for f in files}
    rows = []
    for part, name in enumerate(files):
        part_rows = pq.read_table(os.path.join(version_dir, name)).to_pylist()
        assert [row[I.SOURCE] for row in part_rows] == sorted(row[I.SOURCE] for row in part_rows)
        assert all(I.index_part(row[I.SOURCE], len(files)) == part for row in part_rows)
        rows.extend(part_rows)
    written = {shard['file']: shard['records'] for split in document['splits'].values() for shard in split['shards']}
    assert len(rows) == document['index']['num_records'] == sum(written.values())
    assert len({row[I.SOURCE] for row in rows}) == len(rows)
    for row in rows:
        with open(os.path.join(version_dir, row[I.SHARD]), 'rb') as stream:
            stream.seek(row[I.OFFSET])
            frame = stream.read(row[I.LENGTH])
        (record,) = read_records(io.BytesIO(frame))  # exactly one whole, CRC-clean record
        feature = tf.train.Example.FromString(record).features.feature
        assert feature[F.SOURCE].bytes_list.value[0].decode() == row[I.SOURCE]
        assert feature[F.SHA256].bytes_list.value[0].decode() == row[I.SHA256]
        assert feature[F.LABEL].int64_list.value[0] == row[I.LABEL]
        assert row[I.SHARD].startswith(row[I.SPLIT] + '-')
        if input_root is not None:  # a local copy of the input: sizes agree; local stamps too
            stat = os.stat(os.path.join(input_root, row[I.SOURCE]))
            assert row[I.SOURCE_SIZE] == stat.st_size
            if row[I.SOURCE_GENERATION] is None:
                assert (row[I.SOURCE_MTIME_NS], row[I.SOURCE_CTIME_NS], row[I.SOURCE_INODE]) == (
                    stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            else:  # the input was on gs://
                assert row[I.SOURCE_MTIME_NS] is None and row[I.SOURCE_GENERATION] > 0
                assert row[I.SOURCE_CTIME_NS] is None and row[I.SOURCE_INODE] is None
    return rows


def shard_files(version_dir):
    """{file name: bytes} of every shard in a version folder."""
    return {name: open(os.path.join(version_dir, name), 'rb').read()
            for name in sorted(os.listdir(version_dir)) if layout.parse_shard_file_name(name)}
