"""Reads, decodes, resizes and re-encodes images, and spills their Examples: ImageRef -> RecordRef."""
import apache_beam as beam

from transforms.decode import DecodeResizeEncode
from transforms.examples import ToExample


class Encode(beam.PTransform):
    """ImageRef -> {'records': RecordRef with its frame spilled, 'rejected': Rejected}.

    A Reshuffle first spreads the images over the workers (listing fuses otherwise). ``options`` (a
    RecordOptions) shape each record; ``labels`` is the singleton side input of the class list;
    ``spill_dir`` where the frames go; ``with_hash``: each record also gets its perceptual hash;
    ``decode_threads``: threads each decoding DoFn decodes on (``transforms.decode``; 0: its own).
    """

    def __init__(self, options, labels, spill_dir, retry_policy=None, with_hash=False, decode_threads=0):
        super().__init__()
        self._decode = DecodeResizeEncode(options, retry_policy=retry_policy, with_hash=with_hash,
                                          decode_threads=decode_threads)
        self._to_example = ToExample(labels, spill_dir, retry_policy)

    def expand(self, refs):
        decoded = refs | 'Reshuffle' >> beam.Reshuffle() | 'DecodeResize' >> self._decode
        records = decoded['images'] | 'ToExample' >> self._to_example
        return {'records': records, 'rejected': decoded['rejected']}
