"""Pixel operations shared by the input pipeline and the serving signature, so both see the same values."""
import tensorflow as tf


def to_model_input(image, dtype=tf.float32):
    """Scales a uint8 image to [-1, 1] (the range Keras applications train in) as ``dtype``."""
    return tf.cast(tf.cast(image, tf.float32) / 127.5 - 1.0, dtype)


def augment(image, seed):
    """Light, label-preserving augmentation of a [-1, 1] image: horizontal flip and brightness.

    Stateless ops keyed by ``seed`` (shape [2]) make the result a function of the record's position,
    so it does not depend on parallelism and a resumed run sees what an uninterrupted one would.
    """
    flip_seed, brightness_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    delta = tf.random.stateless_uniform([], brightness_seed, -0.2, 0.2)
    return tf.clip_by_value(image + delta, -1.0, 1.0)


def decode_and_fit(encoded, size, mode='crop'):
    """Decodes any-size image bytes and fits them to ``size`` (height, width) as the build job does.

    ``crop`` keeps the aspect ratio, fills the target and centre-crops; ``pad`` fits inside and pads
    with black; ``stretch`` ignores the aspect ratio. Returns uint8 [height, width, 3].
    """
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    height, width = size
    if mode == 'stretch':
        resized = tf.image.resize(image, size, antialias=True)
    elif mode == 'pad':
        resized = tf.image.resize_with_pad(image, height, width, antialias=True)
    elif mode == 'crop':
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.reduce_max(tf.constant([height, width], tf.float32) / shape)
        scaled = tf.cast(tf.math.ceil(shape * scale), tf.int32)
        resized = tf.image.resize_with_crop_or_pad(tf.image.resize(image, scaled, antialias=True), height, width)
    else:
        raise ValueError(f'unknown resize mode {mode!r}')
    return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)
