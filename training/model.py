"""The networks ``--model`` selects: a small CNN for quick runs, and standard Keras application backbones.

Backbones use ``weights=None`` (nothing is downloaded; they train from scratch on the pipeline's
[-1, 1] images). Every model ends in a float32 logits layer, so under mixed precision the loss and the
softmax stay in full precision.
"""
import keras


def small_cnn(input_shape, num_classes):
    """Three conv-BN-ReLU-pool stages and global pooling: learns the sample shapes in a few epochs on a CPU."""
    inputs = keras.Input(input_shape)
    x = inputs
    for filters in (32, 64, 128):
        x = keras.layers.Conv2D(filters, 3, padding='same', use_bias=False)(x)
        x = keras.layers.BatchNormalization(momentum=0.9)(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, _logits(x, num_classes), name='small_cnn')


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
