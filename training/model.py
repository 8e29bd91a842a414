"""The networks ``--model`` selects: a small CNN for quick runs, and standard Keras application backbones.

Backbones use ``weights=None`` (nothing is downloaded; they train from scratch on the pipeline's
[-1, 1] images). Every model ends in a float32 logits layer, so under mixed precision the loss and the
softmax stay in full precision.
"""
import keras


def small_cnn(input_shape, num_classes):
    """A strided stem and four conv-BN-ReLU-pool stages: learns the sample shapes in a few CPU epochs.

    Each image is first normalised on its own (instance normalisation), so random background colours
    and brightness do not have to be learnt away before shapes can be.
    """
    inputs = keras.Input(input_shape)
    x = keras.layers.LayerNormalization(axis=(1, 2), center=False, scale=False, name='per_image_norm')(inputs)
    x = _conv_bn_relu(x, 16, strides=2)
    for filters in (32, 64, 128, 128):
        x = keras.layers.MaxPooling2D(padding='same')(_conv_bn_relu(x, filters))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _logits(x, num_classes), name='small_cnn')


def _conv_bn_relu(x, filters, strides=1):
    x = keras.layers.Conv2D(filters, 3, strides=strides, padding='same', use_bias=False)(x)
    x = keras.layers.BatchNormalization(momentum=0.9)(x)
    return keras.layers.ReLU()(x)


def _application(constructor):
    def build(input_shape, num_classes):
        backbone = constructor(input_shape=input_shape, include_top=False, weights=None, pooling='avg')
        return keras.Model(backbone.input, _logits(backbone.output, num_classes), name=backbone.name)
    return build


def _logits(features, num_classes):
    return keras.layers.Dense(num_classes, dtype='float32', name='logits')(features)


MODELS = {
    'small_cnn': small_cnn,
    'mobilenet_v2': _application(keras.applications.MobileNetV2),
    'resnet50': _application(keras.applications.ResNet50),
}


def build_model(name, input_shape, num_classes):
    return MODELS[name](input_shape, num_classes)
