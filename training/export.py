"""Exports the trained model as a SavedModel that serves raw image bytes.

The serving signature repeats the training input path (decode, fit to the dataset's size the way the
build job did; the model scales pixels itself), so clients send encoded JPEG (or PNG) bytes of any size and get class
probabilities and label names back: no preprocessing code to copy.
"""
import tensorflow as tf

from training import images

SIGNATURE_NAME = 'serving_default'


class ImageClassifier(tf.Module):
    """Serves ``model`` on encoded image bytes; ``labels`` are the class names in label order."""

    def __init__(self, model, labels, image_shape, resize_mode):
        super().__init__()
        self.model = model
        self._labels = tf.constant(labels)
        self._size = tuple(image_shape[:2])
        self._image_spec = tf.TensorSpec(image_shape, tf.uint8)
        self._resize_mode = resize_mode

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='image_bytes')])
    def serve(self, image_bytes):
        """image_bytes [N] -> probabilities [N, classes], label_names [N, classes], label [N]."""
        batch = tf.map_fn(self._preprocess, image_bytes, fn_output_signature=self._image_spec)
        probabilities = tf.nn.softmax(tf.cast(self.model(batch, training=False), tf.float32))
        count = tf.shape(image_bytes)[0]
        return {
            'probabilities': probabilities,
            'label_names': tf.tile(self._labels[tf.newaxis], [count, 1]),
            'label': tf.gather(self._labels, tf.argmax(probabilities, axis=-1)),
        }

    def _preprocess(self, encoded):
        return images.decode_and_fit(encoded, self._size, self._resize_mode)


def export_saved_model(model, path, *, labels, image_shape, resize_mode):
    """Writes the SavedModel to ``path`` (local or ``gs://``) and returns ``path``."""
    classifier = ImageClassifier(model, labels, image_shape, resize_mode)
    tf.saved_model.save(classifier, path, signatures={SIGNATURE_NAME: classifier.serve})
    return path
