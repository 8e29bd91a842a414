"""Names the damaged shard of a split after TensorFlow's reader failed on it.

TensorFlow's TFRecord reader reports a bad checksum, a short file or a record count that disagrees
with ``dataset.json`` without naming the shard. When a pass over a split fails, the trainer re-reads
that split's shards here with the contract's own framing reader, to name the shard, the record and its
byte offset. Only on the failure path: it reads the whole split.
"""
from contract import layout, tfrecord
from training import tf_files


def first_problem(shards):
    """A message naming the first damaged shard of ``shards`` ((path, records) pairs), or None."""
    for path, expected in shards:
        problem = shard_problem(path, expected)
        if problem:
            return problem
    return None


def shard_problem(path, expected):
    """What is wrong with the shard at ``path``, which ``dataset.json`` says holds ``expected`` records, or None."""
    if tf_files.size(path) is None:
        return f'{path} is missing'
    count = 0
    with tf_files.open_file(path, 'rb') as stream:
        records = tfrecord.read_records(stream)
        while True:
            offset = stream.tell()
            try:
                next(records)
            except StopIteration:
                break
            except ValueError as error:
                return f'{path}: {error} at record {count} (byte offset {offset})'
            count += 1
    if count != expected:
        return f'{path} holds {count} records but {layout.DATASET_JSON} says {expected}'
    return None
