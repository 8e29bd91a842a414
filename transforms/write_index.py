"""Writes the record index (``imgrec.contract.index``): the writers' rows, grouped into parts by source hash.

Rows are light through the shuffle (tuples, about 400 bytes), and they cross it in lists: each shard's
rows, split by part where the shard was written, so one element crosses for each (shard, part), not one
for each record. A part holds about ``imgrec.contract.index.ROWS_PER_PART`` rows, one Parquet row group,
and a shard's rows are bounded by the shard's size, so memory is bounded whatever the dataset's size.
"""
import collections
import io

import apache_beam as beam

from imgrec.contract import index as I, layout
from imgrec.storage.storage import Storage


def index_part_bytes(rows):
    """The Parquet bytes of one part: rows sorted by source, fixed settings, so the bytes are deterministic."""
    import pyarrow  # pylint: disable=import-outside-toplevel
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    rows = sorted(rows, key=I.source_of)
    schema = I.schema()
    columns = list(zip(*rows)) or [()] * len(schema)
    arrays = [pyarrow.array(values, type=field.type) for values, field in zip(columns, schema)]
    table = pyarrow.Table.from_arrays(arrays, schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out, compression='zstd', write_statistics=True)
    return out.getvalue()


def _by_part(rows, parts):
    """(part, [row, ...]) for each part that one shard's ``rows`` reach."""
    by_part = collections.defaultdict(list)
    for row in rows:
        by_part[I.index_part(I.source_of(row), parts)].append(row)
    return by_part.items()


def _write_part(keyed_lists, version_dir, parts, storage):
    part, lists = keyed_lists
    rows = [row for rows in lists for row in rows]
    name = layout.index_file_name(part, parts)
    storage.write(layout.join(version_dir, name), index_part_bytes(rows))
    return {'file': name, 'rows': len(rows)}


class WriteIndex(beam.PTransform):
    """Lists of index rows (``imgrec.contract.index.row``), a shard's each -> one {'file', 'rows'} per index part
    written (every part, even an empty one)."""

    def __init__(self, version_dir: str, storage: Storage):
        super().__init__()
        self._version_dir = version_dir
        self._storage = storage

    def expand(self, shard_rows):
        version_dir, storage = self._version_dir, self._storage
        parts = beam.pvalue.AsSingleton(
            shard_rows
            | 'RowsOfShard' >> beam.Map(len)
            | 'CountRows' >> beam.CombineGlobally(sum).without_defaults()
            | 'Parts' >> beam.Map(I.num_parts),
            default_value=I.num_parts(0))
        # The rows go straight to their part's group (a Flatten with the empty parts' keys would be written out
        # and read back whole by Beam's local runner); the parts no row reached are written empty after.
        written = (shard_rows
                   | 'KeyByPart' >> beam.FlatMap(_by_part, parts)
                   | 'GroupByPart' >> beam.GroupByKey()
                   | 'WritePart' >> beam.Map(_write_part, version_dir, parts, storage))
        empty = (shard_rows.pipeline
                 | 'One' >> beam.Impulse()
                 | 'EmptyParts' >> beam.FlatMap(_empty_parts, parts, beam.pvalue.AsList(written))
                 | 'WriteEmpty' >> beam.Map(_write_part, version_dir, parts, storage))
        return (written, empty) | 'AllParts' >> beam.Flatten()


def _empty_parts(_, parts, written):
    """(part, []) for each of the ``parts`` that no part written (``written``: their {'file', 'rows'}) is."""
    files = {part['file'] for part in written}
    return [(part, []) for part in range(parts) if layout.index_file_name(part, parts) not in files]
