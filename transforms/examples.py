"""Turns encoded images into serialised ``tf.train.Example``s (deterministic bytes, no TensorFlow).

The Examples leave the graph at once: each bundle appends their TFRecord frames to a spill file of its
own, and only a light ``RecordRef`` (where the frame is) goes on through the shuffles. Images come in
batches (lists) and their references leave in the same batches.
"""
import apache_beam as beam
from apache_beam.coders import coders
from apache_beam.metrics import Metrics

from imgrec.contract import counters, features as F
from imgrec.contract.example import encode_example
from imgrec.contract.tfrecord import frame
from imgrec.storage import spill
from imgrec.storage.storage import Storage
from imgrec.transforms.elements import RecordRef


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
    def __init__(self, spill_dir, storage):
        self._spill_dir = spill_dir
        self._storage = storage
        self.examples = Metrics.counter(*counters.EXAMPLES_BUILT)
        self.example_bytes = Metrics.counter(*counters.EXAMPLE_BYTES)
        # What one record costs each shuffle it crosses: the encoded size of its RecordRef.
        self.ref_bytes = Metrics.counter(*counters.RECORD_REF_BYTES)
        self._coder = coders.FastPrimitivesCoder()
        self._labels = self._index_of = None
        self._spill = None

    def start_bundle(self):
        self._spill = spill.SpillFile(self._spill_dir, self._storage)

    def process(self, images, labels):
        if labels is not self._labels:  # the side input is the same object for a whole bundle
            self._labels, self._index_of = labels, {label: i for i, label in enumerate(labels)}
        yield [self._spilled(image) for image in images]

    def _spilled(self, image):
        assert self._index_of is not None and self._spill is not None  # set by process and start_bundle
        index = self._index_of[image.ref.label]
        example = to_example(image, index)
        self.examples.inc()
        self.example_bytes.inc(len(example))
        ref = image.ref
        record = RecordRef(
            source=ref.source, path=ref.path, label_text=ref.label, split=ref.split, label=index,
            sha256=image.sha256, source_size=image.source_bytes, mtime_ns=ref.mtime_ns, generation=ref.generation,
            decisions=image.decisions, payload_file='', payload_offset=0, payload_length=0,
            perceptual_hash=image.perceptual_hash, source_width=image.source_width,
            source_height=image.source_height, upscaled=image.upscaled, ctime_ns=ref.ctime_ns, inode=ref.inode,
            encoded_sha256=image.encoded_sha256)
        # The facts follow the frame: a rerun of a build stopped part way takes the record up from them.
        path, offset, length = self._spill.append(frame(example), spill.facts_of(record))
        record = record._replace(payload_file=path, payload_offset=offset, payload_length=length)
        self.ref_bytes.inc(len(self._coder.encode(record)))
        return record

    def finish_bundle(self):
        # Downstream reads the spill file only after this bundle is committed, so after this close.
        if self._spill is not None:
            self._spill.close()
            self._spill = None


class ToExample(beam.PTransform):
    """Lists of EncodedImage -> lists of RecordRef, each Example's frame appended to a spill file under
    ``spill_dir``.

    ``labels`` is a singleton side input: the ordered class list; ``storage``: the spill folder's.
    """

    def __init__(self, labels, spill_dir: str, storage: Storage):
        super().__init__()
        self._labels = labels
        self._spill_dir = spill_dir
        self._storage = storage

    def expand(self, images):
        return images | 'SerialiseAndSpill' >> beam.ParDo(_ToExampleFn(self._spill_dir, self._storage),
                                                          labels=self._labels)
