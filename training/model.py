"""The networks ``--model`` selects: a small CNN for quick runs, and standard Keras application backbones.

Every model takes uint8 images and scales them to [-1, 1] in its first layer, in its compute dtype
(bfloat16 under mixed precision): the input pipeline and serving hand over raw pixels and cannot
disagree about scaling. Then every model normalises each image on its own (zero mean, unit variance
per channel over its pixels), so random background colours and brightness do not have to be learnt
away before shapes can be (the Keras backbones stayed near chance on the demo's validation split
without it: docs/training.md). Backbones use ``weights=None`` (nothing is downloaded; they
train from scratch) and are the standard Keras applications, unchanged. Every model ends in a float32
logits layer, so under mixed precision the loss and the softmax stay in full precision.
"""
import keras


def build_model(name, input_shape, num_classes):
    """uint8 images [batch, *input_shape] -> float32 logits [batch, num_classes]."""
    inputs = keras.Input(input_shape, dtype='uint8', name='image')
    scaled = keras.layers.Rescaling(1 / 127.5, offset=-1.0, name='scale_to_unit_range')(inputs)
    logits = keras.layers.Dense(num_classes, dtype='float32', name='logits')(MODELS[name](scaled))
    return keras.Model(inputs, logits, name=name)


def per_image_norm(images):
    """Each image normalised on its own (instance normalisation): per channel, over its pixels."""
    return keras.layers.LayerNormalization(axis=(1, 2), center=False, scale=False, name='per_image_norm')(images)


def small_cnn(images):
    """A strided stem and four conv-BN-ReLU-pool stages: learns the sample shapes in a few CPU epochs."""
    x = _conv_bn_relu(per_image_norm(images), 16, strides=2)
    for filters in (32, 64, 128, 128):
        x = keras.layers.MaxPooling2D(padding='same')(_conv_bn_relu(x, filters))
    return keras.layers.GlobalAveragePooling2D()(x)


def _conv_bn_relu(x, filters, strides=1):
    x = keras.layers.Conv2D(filters, 3, strides=strides, padding='same', use_bias=False)(x)
    x = keras.layers.BatchNormalization(momentum=0.9)(x)
    return keras.layers.ReLU()(x)


def _application(constructor):
    """Pooled features of a ``keras.applications`` backbone built on ``images`` normalised one by one,
    with random weights."""
    return lambda images: constructor(input_tensor=per_image_norm(images), include_top=False, weights=None,
                                      pooling='avg').output


# --model name -> function from scaled images to pooled features.
MODELS = {
    'small_cnn': small_cnn,
    'mobilenet_v2': _application(keras.applications.MobileNetV2),
    'resnet50': _application(keras.applications.ResNet50),
}
