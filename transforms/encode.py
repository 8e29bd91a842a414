"""Reads, decodes, resizes and re-encodes images, and spills their Examples: ImageRef -> RecordRef."""
import apache_beam as beam

from imgrec_storage.storage import Storage

from transforms.decode import DecodeResizeEncode
from transforms.examples import ToExample


class Encode(beam.PTransform):
    """ImageRef -> {'records': RecordRef with its frame spilled, 'rejected': Rejected}.

    A Reshuffle first spreads the images over the workers (listing fuses otherwise). ``options`` (a
    RecordOptions) shape each record; ``labels`` is the singleton side input of the class list;
    ``spill_dir`` where the frames go, in ``storage`` (which hands on the storage of each image read,
    ``Storage.for_path``); ``with_hash``: each record also gets its perceptual hash;
    ``decode_threads``: threads each decoding DoFn decodes on (``transforms.decode``; 0: its own).
    """

    def __init__(self, options, labels, spill_dir: str, storage: Storage, with_hash: bool = False,
                 decode_threads: int = 0):
        super().__init__()
        self._decode = DecodeResizeEncode(options, storage, with_hash=with_hash, decode_threads=decode_threads)
        self._to_example = ToExample(labels, spill_dir, storage)

    def expand(self, refs):
        decoded = refs | 'Reshuffle' >> beam.Reshuffle() | 'DecodeResize' >> self._decode
        records = decoded['images'] | 'ToExample' >> self._to_example
        return {'records': records, 'rejected': decoded['rejected']}
