"""Turns the contract's Example features into tensors: the parse spec and the image/label decoder.

``contract.features`` holds the spec as plain data; this is the only place it becomes ``tf.io``.
"""
import tensorflow as tf

from contract import features as F

_TF_DTYPES = {F.INT64: tf.int64, F.BYTES: tf.string}


def feature_spec(features=None):
    """``tf.io`` parse spec for ``features`` (default: every contract feature, one value each)."""
    features = F.FEATURES if features is None else features
    return {key: tf.io.FixedLenFeature([], _TF_DTYPES[dtype]) for key, dtype in features.items()}


def parse_example(serialized):
    """Parses one serialised Example into a dict of scalar tensors keyed by contract feature keys."""
    return tf.io.parse_single_example(serialized, feature_spec())


def decode_image_label(features, image_shape):
    """(uint8 image of the static ``image_shape``, int32 label) of a parsed Example.

    ``ensure_shape`` makes a record of another size fail loudly here rather than inside a batch.
    """
    image = tf.io.decode_jpeg(features[F.IMAGE_ENCODED], channels=image_shape[-1])
    return tf.ensure_shape(image, image_shape), tf.cast(features[F.LABEL], tf.int32)
