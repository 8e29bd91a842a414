"""Turns encoded images into serialised ``tf.train.Example``s (deterministic bytes, no TensorFlow)."""
import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import features as F
from contract.example import encode_example
from transforms.hashing import stable_hash
from transforms.records import ShardRecord

_ORDER_SALT = 'order'


def to_example(image, label_index):
    """The Example bytes of one EncodedImage."""
    return encode_example({
        F.IMAGE_ENCODED: image.jpeg,
        F.IMAGE_FORMAT: F.IMAGE_FORMAT_JPEG,
        F.IMAGE_HEIGHT: image.height,
        F.IMAGE_WIDTH: image.width,
        F.IMAGE_CHANNELS: F.CHANNELS,
        F.LABEL: label_index,
        F.LABEL_TEXT: image.ref.label,
        F.SOURCE: image.ref.source,
        F.SHA256: image.sha256,
    })


class _ToExampleFn(beam.DoFn):
    def __init__(self):
        self.examples = Metrics.counter('examples', 'examples_built')
        self.example_bytes = Metrics.counter('examples', 'example_bytes')
        self._labels = self._index_of = None

    def process(self, image, labels):
        if labels is not self._labels:  # the side input is the same object for a whole bundle
            self._labels, self._index_of = labels, {label: i for i, label in enumerate(labels)}
        index = self._index_of[image.ref.label]
        example = to_example(image, index)
        self.examples.inc()
        self.example_bytes.inc(len(example))
        order_key = (stable_hash(_ORDER_SALT, image.ref.source), image.ref.source)
        yield ShardRecord(split=image.ref.split, label=index, order_key=order_key, example=example)


class ToExample(beam.PTransform):
    """EncodedImage -> ShardRecord, with ``labels`` (a singleton side input: the ordered class list)."""

    def __init__(self, labels):
        super().__init__()
        self._labels = labels

    def expand(self, images):
        return images | 'Serialise' >> beam.ParDo(_ToExampleFn(), labels=self._labels)
