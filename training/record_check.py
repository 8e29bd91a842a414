"""Names the damaged shard of a split after TensorFlow's reader failed on it.

TensorFlow's TFRecord reader reports a bad checksum, a short file or a record count that disagrees
with ``dataset.json`` without naming the shard, and a record of another image size than ``dataset.json``
says, or a label past its labels, as a shape or label error of some node. When a pass over a split
fails, the trainer re-reads that split's shards here with the contract's own framing and Example
readers, to name the shard, the record and its byte offset. Only on the failure path: it reads the
whole split.
"""
from imgrec.contract import features as F, layout, tfrecord
from imgrec.contract.example import decode_example
from imgrec.storage import storage


def first_problem(shards, image_shape=None, num_labels=None):
    """A message naming the first damaged shard of ``shards`` ((path, records) pairs), or None.

    With ``image_shape`` ((height, width, channels)) and ``num_labels``, as ``dataset.json`` gives them,
    a record of another size or with a label outside [0, num_labels) is a problem too.
    """
    for path, expected in shards:
        problem = shard_problem(path, expected, image_shape, num_labels)
        if problem:
            return problem
    return None


def record_problem(record, image_shape=None, num_labels=None):
    """How the serialised Example ``record`` disagrees with ``dataset.json``'s image shape and labels, or None."""
    try:
        values = decode_example(record)
    except ValueError as error:
        return f'is no Example ({error})'
    if image_shape is not None:
        found = tuple(values.get(key) for key in (F.IMAGE_HEIGHT, F.IMAGE_WIDTH, F.IMAGE_CHANNELS))
        if found != tuple(image_shape):
            return (f"is a {'x'.join(map(str, found))} image, but {layout.DATASET_JSON} says "
                    f"{'x'.join(map(str, image_shape))}")
    label = values.get(F.LABEL)
    if num_labels is not None and not (isinstance(label, int) and 0 <= label < num_labels):
        return f'has label {label}, but {layout.DATASET_JSON} lists {num_labels} labels'
    return None


def shard_problem(path, expected, image_shape=None, num_labels=None):
    """What is wrong with the shard at ``path``, which ``dataset.json`` says holds ``expected`` records (of
    ``image_shape`` and labels under ``num_labels``, when given), or None."""
    files = storage.storage_for(path)
    if not files.exists(path):
        return f'{path} is missing'
    count = 0
    with files.open_read(path) as stream:
        records = tfrecord.read_records(stream)
        while True:
            offset = stream.tell()
            try:
                record = next(records)
            except StopIteration:
                break
            except ValueError as error:
                return f'{path}: {error} at record {count} (byte offset {offset})'
            problem = record_problem(record, image_shape, num_labels)
            if problem:
                return f'{path}: record {count} (byte offset {offset}) {problem}'
            count += 1
    if count != expected:
        return f'{path} holds {count} records but {layout.DATASET_JSON} says {expected}'
    return None
