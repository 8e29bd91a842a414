"""The dead-letter path: every input that was not written, gathered in one place and counted by reason."""
import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters


def _counted(item):
    Metrics.counter(counters.QUARANTINE, item.reason).inc()
    return item


class Quarantine(beam.PTransform):
    """A tuple of PCollections of Rejected -> one PCollection, each reason counted as metric quarantine/<reason>."""

    def expand(self, rejected):
        return rejected | 'Gather' >> beam.Flatten() | 'CountReasons' >> beam.Map(_counted)
