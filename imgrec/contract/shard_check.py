"""The cheap check of a published version: every shard ``dataset.json`` lists exists with its size.

It reads no records: one size look-up a shard, so a reader can run it before it starts (training does;
a full check re-reads the records). The caller supplies ``size_of``, which keeps this module free of
any filesystem library: local disks and ``gs://`` are both the caller's business.
"""
from imgrec.contract import layout


def shard_problems(metadata, version_dir, size_of, splits=None):
    """One message per shard of ``splits`` (default: all) that is missing or not the size ``dataset.json`` gives.

    ``size_of(path)`` returns a file's size in bytes, or None if it does not exist.
    """
    problems = []
    for split in sorted(metadata['splits'] if splits is None else splits):
        for shard in metadata['splits'][split]['shards']:
            path = layout.join(version_dir, shard['file'])
            actual = size_of(path)
            if actual is None:
                problems.append(f'{path} is missing')
            elif actual != shard['bytes']:
                problems.append(f"{path} holds {actual} bytes but {layout.DATASET_JSON} says {shard['bytes']}")
    return problems
