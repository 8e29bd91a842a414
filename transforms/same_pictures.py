"""The exact near-duplicate check (``--near_duplicate_check exact``, the default): images whose written JPEGs are
the same bytes, the same picture at the output size however their sources differ (another file format, a
re-save, metadata: the encoder is deterministic, ``image_ops.encode_jpeg``).

Each record carries the sha256 of its JPEG (``RecordRef.encoded_sha256``, taken as it was encoded), so the check
is one shuffle of one small element an image, keyed by that digest: no hash of the pixels, no frame read back,
and a cost that grows with the images whatever they look like. A picture's copies meet whole on one worker, so
each is one component already: no label round is needed.
"""
import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters
from imgrec.transforms.near_duplicate_candidates import member_id


def keyed_by_picture(record):
    """(the digest of the record's JPEG as bytes, its source), or nothing for a record without one."""
    if record.encoded_sha256 is not None:
        yield bytes.fromhex(record.encoded_sha256), record.source


def star(sources):
    """The component of ``sources`` (two or more images that wrote one picture): (its first by member id, [(source,
    ((neighbour, 0, 1.0), ...)), ...]), each copy linked to the first, as ``near_duplicate_groups`` takes
    components. The first is the copy the perceptual check's stars start from too (``member_id``), so which copy a
    group is told by does not depend on where the records were."""
    first = min(sources, key=lambda source: (member_id(source), source))
    others = sorted(set(sources) - {first})
    return first, [(first, tuple((other, 0, 1.0) for other in others)),
                   *((other, ((first, 0, 1.0),)) for other in others)]


class _StarsFn(beam.DoFn):
    """(digest, [source, ...]) -> its component (``star``) when two or more images wrote the picture."""

    def __init__(self):
        self.confirmed = Metrics.counter(*counters.PAIRS_CONFIRMED)

    def process(self, keyed):
        sources = set(keyed[1])
        if len(sources) > 1:
            self.confirmed.inc(len(sources) - 1)
            yield star(sources)


class SamePictures(beam.PTransform):
    """RecordRef -> the components of the images that wrote the same JPEG (``star``), one a picture."""

    def expand(self, records):
        return (records
                | 'ByPicture' >> beam.FlatMap(keyed_by_picture)
                | 'SamePicture' >> beam.GroupByKey()
                | 'Stars' >> beam.ParDo(_StarsFn()))
