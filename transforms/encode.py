"""Reads, decodes, resizes and re-encodes images, and spills their Examples: ImageRef -> RecordRef batches.

Images cross Beam in batches: each element crossing the data plane between the runner and its workers
is framed, encoded and decoded in Python, a cost per element whatever it carries, so one element carries
``BATCH_SIZE`` images (the last of a bundle fewer) from the listing's stage to the end of encoding. The
batches are made where the images are listed (``beam.BatchElements`` with a fixed size: left to adapt,
it settled at about 4 images a batch in the benchmark) and a Reshuffle spreads them over the workers. Which images share a batch
varies from run to run; nothing written depends on it: every image is decoded and judged on its own,
and the shards, their order and the index follow from each image alone.
"""
import apache_beam as beam

from imgrec.storage.storage import Storage

from imgrec.transforms.decode import DecodeResizeEncode
from imgrec.transforms.examples import ToExample

# Images an element carries: at a hundred, the cost of an element is spread to a hundredth, while a build
# of a few thousand images still has dozens of batches to spread over the workers.
BATCH_SIZE = 100


def batched():
    """Lists of ``BATCH_SIZE`` elements (the last of a bundle fewer), as Beam's BatchElements makes them."""
    return beam.BatchElements(min_batch_size=BATCH_SIZE, max_batch_size=BATCH_SIZE, record_metrics=False)


class Encode(beam.PTransform):
    """ImageRef -> {'records': lists of RecordRef, each with its frame spilled, 'rejected': Rejected}.

    ``options`` (a RecordOptions) shape each record; ``labels`` is the singleton side input of the class
    list; ``spill_dir`` where the frames go; ``with_hash``: each record also gets its perceptual hash (the
    pixel check reads the pixels back from the spilled frame); ``with_digest``: its ``encoded_sha256`` (the exact
    check's key); ``decoders``: threads each decoding DoFn decodes on (``imgrec.transforms.decode``; 0: its own).
    """

    def __init__(self, options, labels, spill_dir: str, storage: Storage, with_hash: bool = False,
                 with_digest: bool = False, decoders: int = 0):
        super().__init__()
        self._decode = DecodeResizeEncode(options, storage, with_hash=with_hash, with_digest=with_digest,
                                          decoders=decoders)
        self._to_example = ToExample(labels, spill_dir, storage)

    def expand(self, refs):
        decoded = (refs
                   | 'Batch' >> batched()
                   | 'Reshuffle' >> beam.Reshuffle()
                   | 'DecodeResize' >> self._decode)
        records = decoded['images'] | 'ToExample' >> self._to_example
        return {'records': records, 'rejected': decoded['rejected']}
