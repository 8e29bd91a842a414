"""Reads, decodes, resizes and re-encodes images, and spills their Examples: ImageRef -> RecordRef."""
import apache_beam as beam

from transforms.decode import DecodeResizeEncode
from transforms.examples import ToExample


class Encode(beam.PTransform):
    """ImageRef -> {'records': RecordRef with its frame spilled, 'rejected': Rejected}.

    A Reshuffle first spreads the images over the workers (listing fuses otherwise). ``labels`` is the
    singleton side input of the class list; ``spill_dir`` where the frames go.
    """

    def __init__(self, image_size, resize_mode, jpeg_quality, max_pixels, min_size, labels, spill_dir,
                 retry_policy=None):
        super().__init__()
        self._decode = DecodeResizeEncode(image_size, resize_mode, jpeg_quality, max_pixels, min_size,
                                          retry_policy=retry_policy)
        self._to_example = ToExample(labels, spill_dir, retry_policy)

    def expand(self, refs):
        decoded = refs | 'Reshuffle' >> beam.Reshuffle() | 'DecodeResize' >> self._decode
        records = decoded['images'] | 'ToExample' >> self._to_example
        return {'records': records, 'rejected': decoded['rejected']}
