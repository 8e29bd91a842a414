"""Feature keys of every ``tf.train.Example`` the build writes, and their types.

``FEATURES`` is the parse spec in plain data; ``imgrec.versions.tf_features`` turns it into ``tf.io`` features.
"""
IMAGE_ENCODED = 'image/encoded'
IMAGE_FORMAT = 'image/format'
IMAGE_HEIGHT = 'image/height'
IMAGE_WIDTH = 'image/width'
IMAGE_CHANNELS = 'image/channels'
LABEL = 'image/class/label'
LABEL_TEXT = 'image/class/text'
SOURCE = 'image/source'
SHA256 = 'image/key/sha256'

IMAGE_FORMAT_JPEG = b'JPEG'
CHANNELS = 3

INT64 = 'int64'
BYTES = 'bytes'

# key -> dtype; every feature holds exactly one value.
FEATURES = {
    IMAGE_ENCODED: BYTES,
    IMAGE_FORMAT: BYTES,
    IMAGE_HEIGHT: INT64,
    IMAGE_WIDTH: INT64,
    IMAGE_CHANNELS: INT64,
    LABEL: INT64,
    LABEL_TEXT: BYTES,
    SOURCE: BYTES,
    SHA256: BYTES,
}
