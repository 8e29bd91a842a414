"""The split each image was published in: what keeps a published image in its split on a rebuild.

A refresh and a ``--full`` build into the same output read it alike, from the previous version's
record index, so both deal the same splits (``imgrec.transforms.splits``).
"""
import apache_beam as beam

from imgrec.transforms.previous import WRITTEN


def _published(joined):
    _, sides = joined
    written = list(sides['written'])
    for record in sides['record']:
        split = next((split for sha256, split in written if sha256 == record.sha256), None)
        yield record._replace(published_split=split)


class WithPublishedSplits(beam.PTransform):
    """RecordRef -> the same with ``published_split``: the split the previous version wrote the same
    source with the same bytes (sha256) in, else None. ``previous``: ``previous.ReadPrevious``'s output."""

    def __init__(self, previous):
        super().__init__()
        self._previous = previous

    def expand(self, records):
        written = self._previous | 'WrittenSplits' >> beam.FlatMap(
            lambda kv: [(kv[0], (kv[1][1]['sha256'], kv[1][1]['split']))] if kv[1][0] == WRITTEN else [])
        return ({'record': records | 'KeyBySource' >> beam.Map(lambda record: (record.source, record)),
                 'written': written}
                | 'JoinPublished' >> beam.CoGroupByKey()
                | 'SetPublished' >> beam.FlatMap(_published))
