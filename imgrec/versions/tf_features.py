"""The contract's Example features as TensorFlow's parser reads them: the one place they become ``tf.io``.

``imgrec.contract.features`` holds the spec as plain data. verify-dataset parses with it, and so does training,
which imports it from here (a version's reader sits below training). Importing this imports TensorFlow.
"""
import tensorflow as tf

from imgrec.contract import features as F

_TF_DTYPES = {F.INT64: tf.int64, F.BYTES: tf.string}


def feature_spec(features=None):
    """``tf.io`` parse spec for ``features`` (default: every contract feature, one value each)."""
    features = F.FEATURES if features is None else features
    return {key: tf.io.FixedLenFeature([], _TF_DTYPES[dtype]) for key, dtype in features.items()}
