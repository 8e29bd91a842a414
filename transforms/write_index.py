"""Writes the record index (``imgrec.contract.index``): the writers' rows, grouped into parts by source hash.

Rows are light through the shuffle (tuples, about 200 bytes); a part holds about
``imgrec.contract.index.ROWS_PER_PART`` of them, one Parquet row group, so a part writer's memory is bounded
whatever the dataset's size.
"""
import io

import apache_beam as beam

from imgrec.contract import index as I, layout
from imgrec_storage.storage import Storage


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


def _write_part(keyed_rows, version_dir, parts, storage):
    part, rows = keyed_rows
    rows = list(rows)
    name = layout.index_file_name(part, parts)
    storage.write(layout.join(version_dir, name), index_part_bytes(rows))
    return {'file': name, 'rows': len(rows)}


class WriteIndex(beam.PTransform):
    """Index rows (``imgrec.contract.index.row``) -> one {'file', 'rows'} per index part written (every part, even
    an empty one)."""

    def __init__(self, version_dir: str, storage: Storage):
        super().__init__()
        self._version_dir = version_dir
        self._storage = storage

    def expand(self, rows):
        version_dir, storage = self._version_dir, self._storage
        parts = beam.pvalue.AsSingleton(
            rows | 'CountRows' >> beam.combiners.Count.Globally().without_defaults() | 'Parts' >> beam.Map(I.num_parts),
            default_value=I.num_parts(0))
        slots = (rows.pipeline
                 | 'One' >> beam.Impulse()
                 | 'AllParts' >> beam.FlatMap(lambda _, n: [(part, None) for part in range(n)], parts))
        keyed = rows | 'KeyByPart' >> beam.Map(lambda row, n: (I.index_part(I.source_of(row), n), row), parts)
        return ((keyed, slots)
                | 'WithEmptyParts' >> beam.Flatten()
                | 'GroupByPart' >> beam.GroupByKey()
                | 'WritePart' >> beam.Map(
                    lambda kv, n: _write_part((kv[0], [row for row in kv[1] if row is not None]),
                                              version_dir, n, storage), parts))
