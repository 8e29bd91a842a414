"""Pixel operations on uint8 images: training augmentation, and serving's decode-and-fit.

Scaling to the model's range is not here: it is the first layer of every model (``imgrec.training.model``),
so the input pipeline ships one byte a pixel and serving cannot scale differently from training.
"""
import tensorflow as tf


def augment(image, seed, max_shift=0.0):
    """Light, label-preserving augmentation of a uint8 image: a random horizontal flip, and with
    ``max_shift`` > 0 a random shift of up to that fraction of each side (reflect-padded, then cropped
    back to the image's size).

    The shift is for the Keras backbones, which overfit the demo's 512 images less with it (ResNet50:
    53.9% on validation after 6 epochs instead of 44.5%); the small CNN gets only the flip (a shift cost
    it 3 points in 6 epochs, and measured 3x slower than the flip on a CPU host). The stateless ops keyed
    by ``seed`` (shape [2]) make the result a function of the record's position in its epoch, so a
    resumed run sees what an uninterrupted one would.
    """
    image = tf.image.stateless_random_flip_left_right(image, seed)
    if max_shift <= 0:
        return image
    height, width = image.shape[0], image.shape[1]
    pad_y, pad_x = round(max_shift * height), round(max_shift * width)
    padded = tf.pad(image, [[pad_y, pad_y], [pad_x, pad_x], [0, 0]], mode='REFLECT')
    return tf.image.stateless_random_crop(padded, tf.shape(image), tf.random.experimental.stateless_fold_in(seed, 1))


def decode_and_fit(encoded, size, mode='crop'):
    """Decodes any-size image bytes and fits them to ``size`` (height, width) as the build job does."""
    return fit(tf.io.decode_image(encoded, channels=3, expand_animations=False), size, mode)


def fit(image, size, mode='crop'):
    """A uint8 image [h, w, 3] fitted to ``size`` (height, width) as the build job fits one.

    ``crop`` keeps the aspect ratio, fills the target and centre-crops; ``pad`` fits inside and pads
    with black; ``stretch`` ignores the aspect ratio. Returns uint8 [height, width, 3].
    """
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
