"""The split each image was published in: what keeps a published image in its split on a rebuild.

A refresh and a ``--full`` build into the same output read it alike, from the previous version's
record index, so both deal the same splits (``imgrec.transforms.splits``).
"""
import apache_beam as beam

from imgrec.transforms.previous import WRITTEN


def _written_split(keyed):
    """(source, Fate) -> (source, (sha256, split)) of an image the previous version wrote; none else."""
    source, fate = keyed
    return [(source, (fate.facts['sha256'], fate.facts['split']))] if fate.kind == WRITTEN else []


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
        written = self._previous | 'WrittenSplits' >> beam.FlatMap(_written_split)
        return ({'record': records | 'KeyBySource' >> beam.Map(lambda record: (record.source, record)),
                 'written': written}
                | 'JoinPublished' >> beam.CoGroupByKey()
                | 'SetPublished' >> beam.FlatMap(_published))
