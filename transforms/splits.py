"""Assigns each image to a split by a stable hash of its source name.

The hash, not the listing order, decides the split, so an image keeps its split when the dataset is
rebuilt with more or fewer images.
"""
import apache_beam as beam

from contract.hashing import stable_hash

_SALT = 'split'


def split_for(source, weights):
    """The split of ``source`` for ``weights``: an ordered sequence of (split name, integer weight)."""
    point = stable_hash(_SALT, source) % sum(weight for _, weight in weights)
    for name, weight in weights:
        if point < weight:
            return name
        point -= weight
    raise AssertionError('unreachable: point is below the total weight')


class AssignSplit(beam.PTransform):
    """ImageRef -> the same ImageRef with its ``split`` set."""

    def __init__(self, weights):
        super().__init__()
        self._weights = tuple(weights)

    def expand(self, refs):
        weights = self._weights
        return refs | 'SetSplit' >> beam.Map(lambda ref: ref._replace(split=split_for(ref.source, weights)))
