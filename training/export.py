"""Exports the trained model as a SavedModel that serves raw image bytes, with Keras's own export path.

``keras.export.ExportArchive`` tracks every Keras variable, so the SavedModel loads in TensorFlow's
session loader too (``saved_model_cli run``, TF Serving, Vertex AI prediction, KServe): a Keras 3 model
saved through a ``tf.Module`` does not, failing with "Could not find variable".

The signature repeats the training input path (decode, fit to the dataset's size the way the build job
did; the model scales pixels itself), so clients send encoded JPEG, PNG, GIF or BMP bytes of any size:
no preprocessing code to copy. An input that cannot be decoded does not fail its batch: it comes back
with ``valid`` false, ``label_id`` -1, ``label`` '' and all-zero ``probabilities``. Every output has
the batch as its first dimension, so ``label_names`` is repeated per image: TF Serving's and Vertex AI's
row format ("instances" -> "predictions") requires that of every output.
"""
import keras
import tensorflow as tf

from imgrec.training import images

SIGNATURE_NAME = 'serving_default'
INPUT_NAME = 'image_bytes'


def serving_function(model, *, labels, image_shape, resize_mode):
    """image_bytes [N] -> {probabilities [N, C], label [N], label_id [N], valid [N], label_names [N, C]}."""
    names = tf.constant(labels)
    image_shape = tuple(image_shape)

    def fit(index, encoded):
        return index, tf.ensure_shape(images.decode_and_fit(encoded, image_shape[:2], resize_mode), image_shape)

    def serve(image_bytes):
        count = tf.shape(image_bytes)[0]
        decoded = tf.data.Dataset.from_tensor_slices((tf.range(count), image_bytes)).map(fit).ignore_errors()
        # One batch holds every decodable image and a blank sentinel, so it exists and the model never sees an
        # empty batch (which some layers refuse) even when nothing decodes; the sentinel's row is dropped.
        sentinel = tf.data.Dataset.from_tensors((tf.constant(-1), tf.zeros(image_shape, tf.uint8)))
        indices, batch = decoded.concatenate(sentinel).batch(tf.cast(count, tf.int64) + 1).get_single_element()
        positions = indices[:-1, tf.newaxis]
        probabilities = tf.nn.softmax(tf.cast(model(batch, training=False), tf.float32))[:-1]
        best = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        label_id = tf.scatter_nd(positions, best + 1, [count]) - 1
        valid = label_id >= 0
        return {
            'probabilities': tf.scatter_nd(positions, probabilities, [count, len(labels)]),
            'label_id': label_id,
            'label': tf.where(valid, tf.gather(names, tf.maximum(label_id, 0)), ''),
            'valid': valid,
            'label_names': tf.tile(names[tf.newaxis], [count, 1]),
        }

    return serve


def export_saved_model(model, path, *, labels, image_shape, resize_mode):
    """Writes the SavedModel to ``path`` (local or ``gs://``) and returns ``path``."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(SIGNATURE_NAME, serving_function(model, labels=labels, image_shape=image_shape,
                                                          resize_mode=resize_mode),
                         input_signature=[tf.TensorSpec([None], tf.string, name=INPUT_NAME)])
    archive.write_out(path, verbose=False)
    return path
