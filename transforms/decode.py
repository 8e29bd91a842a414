"""Reads each image, decodes, resizes and re-encodes it; unusable inputs go to a side output."""
import hashlib

import apache_beam as beam
from apache_beam.metrics import Metrics

from transforms import image_ops, storage
from transforms.records import EncodedImage, Rejected

REJECTED = 'rejected'


class _DecodeResizeEncodeFn(beam.DoFn):
    def __init__(self, image_size, resize_mode, jpeg_quality, max_pixels, min_side):
        self._image_size = image_size
        self._resize_mode = resize_mode
        self._jpeg_quality = jpeg_quality
        self._max_pixels = max_pixels
        self._min_side = min_side
        self.decoded = Metrics.counter('decode', 'images_decoded')
        self.rejected = Metrics.counter('decode', 'images_rejected')
        self.bytes_read = Metrics.counter('decode', 'bytes_read')
        self.source_bytes = Metrics.distribution('decode', 'source_bytes')

    def process(self, ref):
        try:
            data = storage.read_bytes(ref.path)
        except (OSError, IOError) as error:
            self.rejected.inc()
            yield beam.pvalue.TaggedOutput(REJECTED, Rejected(ref.source, 'read_error', str(error), -1, ref.split))
            return
        self.bytes_read.inc(len(data))
        self.source_bytes.update(len(data))
        try:
            jpeg, _ = image_ops.decode_resize_encode(
                data, self._image_size, self._resize_mode, self._jpeg_quality,
                max_pixels=self._max_pixels, min_side=self._min_side)
        except image_ops.ImageRejected as rejection:
            self.rejected.inc()
            yield beam.pvalue.TaggedOutput(
                REJECTED, Rejected(ref.source, rejection.reason, rejection.message, len(data), ref.split))
            return
        self.decoded.inc()
        height, width = self._image_size
        yield EncodedImage(ref=ref, sha256=hashlib.sha256(data).hexdigest(), jpeg=jpeg, height=height, width=width)


class DecodeResizeEncode(beam.PTransform):
    """ImageRef -> {'images': EncodedImage, 'rejected': Rejected}."""

    def __init__(self, image_size, resize_mode='crop', jpeg_quality=90,
                 max_pixels=image_ops.DEFAULT_MAX_PIXELS, min_side=1):
        super().__init__()
        self._fn = _DecodeResizeEncodeFn(image_size, resize_mode, jpeg_quality, max_pixels, min_side)

    def expand(self, refs):
        results = refs | 'Decode' >> beam.ParDo(self._fn).with_outputs(REJECTED, main='images')
        return {'images': results.images, REJECTED: results[REJECTED]}
