"""Turns the contract's Example features into tensors: parsing and the image/label decoder.

The parse spec comes from ``imgrec.versions.tf_features``, which verify-dataset uses too.
"""
import tensorflow as tf

from imgrec.contract import features as F
from imgrec.versions.tf_features import feature_spec


def parse_example(serialized):
    """Parses one serialised Example into a dict of scalar tensors keyed by contract feature keys."""
    return tf.io.parse_single_example(serialized, feature_spec())


def decode_image_label(features, image_shape):
    """(uint8 image of the static ``image_shape``, int32 label) of a parsed Example.

    ``ensure_shape`` makes a record of another size fail loudly here rather than inside a batch.
    """
    image = tf.io.decode_jpeg(features[F.IMAGE_ENCODED], channels=image_shape[-1])
    return tf.ensure_shape(image, image_shape), tf.cast(features[F.LABEL], tf.int32)
