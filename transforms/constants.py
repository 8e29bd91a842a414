"""PCollections made from nothing, in the fewest graph steps: one value (``Value``), or none (``Empty``).

``beam.Create`` costs four steps each, and graph construction is most of a small build's start; an
Impulse and a Map cost two.
"""
import apache_beam as beam


class Value(beam.PTransform):
    """PBegin -> a PCollection of the one element ``value``."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def expand(self, pbegin):
        value = self._value
        return pbegin | 'Impulse' >> beam.Impulse() | 'Value' >> beam.Map(lambda _: value)


class Empty(beam.PTransform):
    """PBegin -> a PCollection of no element."""

    def expand(self, pbegin):
        return pbegin | 'Impulse' >> beam.Impulse() | 'Nothing' >> beam.FlatMap(lambda _: ())
