"""The input pipeline: a split's TFRecord shards -> static-shape (image, label) batches.

Follows Model Garden's input reader: list the split's shards -> shuffle the file order with a seed ->
keep this input pipeline's shards (``tf.distribute.InputContext``) -> interleave ``TFRecordDataset``s ->
shuffle the serialised records -> parse -> decode -> augment -> batch -> prefetch. Meant to be called
by ``strategy.distribute_datasets_from_function``, so every host reads only its own files and every
replica gets its own per-replica batch. Images stay uint8: the model scales them in its first layer,
in its compute dtype (bfloat16 under mixed precision), which keeps host work and infeed bytes at a
quarter of float32's: on a CPU host, per-image float conversion cost this reader about half its speed.

A training dataset is one epoch, whose order is a pure function of (seed, epoch, input pipeline): each
epoch reshuffles with its own seed, so a run resumed at (epoch, step) skips exactly the records it
already trained on, without replaying earlier epochs or checkpointing shuffle buffers. (tf.data also
mixes TensorFlow's global seed into shuffles; ``imgrec.training.trainer`` sets it from ``--seed`` before it builds
the model.)
Evaluation reads each record once and pads the last batches with ``PAD_LABEL`` records, so shapes stay
static (TPU) and no record is dropped.

``load`` is the same reader for a notebook or a Keras ``fit``: every record of a split once, as (image,
label) pairs, optionally shuffled and batched (docs/python-api.md).

Every shard is read with its record count from ``dataset.json``: a shard holding more records fails the
pass when the first extra one is read, and the trainer then names the shard (``record_check``) instead of
training on a silently different set of records. A shard holding fewer is caught by evaluation, which
counts the records it read against ``dataset.json``.
"""
import dataclasses
import random

import tensorflow as tf

from imgrec.console.errors import DataError, UserError
from imgrec.storage import leases
from imgrec.training import dataset_version, example_parsing, images
from imgrec.training.dataset_info import DatasetInfo

PAD_LABEL = -1
MAX_CYCLE_LENGTH = 16
_EPOCH_SEED_STRIDE = 1_000_003


@dataclasses.dataclass(frozen=True)
class InputConfig:
    """How to read one split. ``global_batch_size`` counts the images of one step over all replicas."""
    split: str
    global_batch_size: int
    is_training: bool
    seed: int = 0
    shuffle_buffer_size: int = 1024
    # Files read at once. None: all of this pipeline's files, up to MAX_CYCLE_LENGTH. Never AUTOTUNE,
    # which depends on the core count and so would change the record order between machines.
    cycle_length: int | None = None
    block_length: int = 1
    deterministic: bool = True
    cache: bool = False  # keep decoded uint8 images in memory after the first pass
    augment: bool = True
    max_shift: float = 0.0  # with augment: random shifts of up to this fraction of a side (images.augment)


class InputReader:
    """Reads one split of a ``DatasetVersion``; ``parse_fn``/``decode_fn`` replace the contract's."""

    def __init__(self, source, config, *, parse_fn=example_parsing.parse_example,
                 decode_fn=example_parsing.decode_image_label):
        self.config = config
        self.image_shape = source.image_shape
        self.num_labels = len(source.labels)  # what a record's label must stay under
        self._shards = source.shards(config.split)
        self._parse_fn = parse_fn
        self._decode_fn = decode_fn
        self._cached = {}  # shards -> decoded dataset, reused by every epoch when config.cache

    @property
    def shards(self):
        """(path, records) of every shard of the split, in index order."""
        return list(self._shards)

    @property
    def num_examples(self):
        return sum(records for _, records in self._shards)

    def pipeline_shards(self, num_input_pipelines, input_pipeline_id):
        """(path, records) of the shards one input pipeline reads: the seeded file order, dealt round-robin.

        Refuses fewer shards than pipelines: the alternative, every host reading everything, silently
        repeats each record once per host in every epoch.
        """
        count = len(self._shards)
        if count < num_input_pipelines:
            split = self.config.split
            raise UserError(f'split {split!r} has {count} shard(s) but is read by {num_input_pipelines} input '
                            f'pipelines, each of which needs its own; rebuild the dataset with --num_shards '
                            f'{split}={num_input_pipelines} (or a multiple of {num_input_pipelines})')
        order = random.Random(self.config.seed).sample(range(count), count)
        return [self._shards[i] for i in order[input_pipeline_id::num_input_pipelines]]

    def pipeline_batch_size(self, num_input_pipelines):
        """Images one input pipeline supplies per step (for all the replicas it feeds)."""
        if self.config.global_batch_size % num_input_pipelines:
            raise UserError(f'batch size {self.config.global_batch_size} is not divisible by the '
                            f'{num_input_pipelines} input pipelines')
        return self.config.global_batch_size // num_input_pipelines

    def steps_per_epoch(self, num_input_pipelines=1):
        """Steps in one pass, from the shard record counts in ``dataset.json``.

        Training: the full batches every pipeline can fill (all pipelines must take the same steps).
        Evaluation: enough batches for the largest pipeline; the rest is padding.
        """
        batch = self.pipeline_batch_size(num_input_pipelines)
        counts = [sum(records for _, records in self.pipeline_shards(num_input_pipelines, pipeline))
                  for pipeline in range(num_input_pipelines)]
        if not self.config.is_training:
            return -(-max(counts) // batch)
        steps = min(counts) // batch
        if steps == 0:
            raise UserError(f'split {self.config.split!r} has {min(counts)} records per input pipeline, '
                            f'fewer than one batch of {batch}; lower --batch_size')
        return steps

    def dataset(self, input_context=None, *, epoch=0, start_step=0):
        """One pass of batches of (uint8 image [per-replica batch, H, W, C], int32 label) for one input pipeline.

        Training yields epoch ``epoch`` from step ``start_step`` on; evaluation yields every record once.
        """
        context = input_context or tf.distribute.InputContext()
        pipelines = context.num_input_pipelines
        per_replica = context.get_per_replica_batch_size(self.config.global_batch_size)
        pipeline_batch = self.pipeline_batch_size(pipelines)
        records_per_pass = self.steps_per_epoch(pipelines) * pipeline_batch
        shards = self.pipeline_shards(pipelines, context.input_pipeline_id)
        if self.config.is_training:
            examples = self._training_examples(shards, records_per_pass, epoch, start_step * pipeline_batch)
        else:
            examples = self._evaluation_examples(shards, records_per_pass)
        return examples.batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def _read(self, shards, seed=None):
        files = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*shards))))
        if seed is not None:
            files = files.shuffle(len(shards), seed=seed, reshuffle_each_iteration=False)
        return files.interleave(
            _counted_records,
            cycle_length=self.config.cycle_length or min(len(shards), MAX_CYCLE_LENGTH),
            block_length=self.config.block_length,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=self.config.deterministic)

    def _decode(self, serialized):
        return self._decode_fn(self._parse_fn(serialized), self.image_shape)

    def _decoded(self, shards):
        key = tuple(shards)
        if key in self._cached:
            return self._cached[key]
        decoded = self._read(shards).map(self._decode, tf.data.AUTOTUNE, deterministic=self.config.deterministic)
        if self.config.cache:
            decoded = self._cached[key] = decoded.cache()
        return decoded

    def _training_examples(self, shards, records_per_epoch, epoch, skip):
        seed = self.config.seed * _EPOCH_SEED_STRIDE + epoch
        stream = self._decoded(shards) if self.config.cache else self._read(shards, seed)
        shuffled = stream.shuffle(self.config.shuffle_buffer_size, seed=seed, reshuffle_each_iteration=False)
        positioned = shuffled.enumerate().take(records_per_epoch).skip(skip)
        return positioned.map(lambda index, payload: self._training_example(tf.stack([seed, index]), payload),
                              tf.data.AUTOTUNE, deterministic=self.config.deterministic)

    def _training_example(self, seed, payload):
        image, label = payload if self.config.cache else self._decode(payload)
        return (images.augment(image, seed, self.config.max_shift) if self.config.augment else image), label

    def examples(self, *, shuffle=False, seed=None):
        """Every record of the split once, decoded and not batched: (uint8 image, int32 label).

        ``shuffle``: the file order, then records within ``shuffle_buffer_size``, anew on each pass (by
        ``seed`` when given, so the passes' orders repeat from run to run).
        """
        shards = self.shards
        files = tf.data.Dataset.from_tensor_slices(tuple(map(list, zip(*shards))))
        if shuffle:
            files = files.shuffle(len(shards), seed=seed)
        records = files.interleave(_counted_records, cycle_length=self.config.cycle_length or min(len(shards),
                                                                                                  MAX_CYCLE_LENGTH),
                                   block_length=self.config.block_length, num_parallel_calls=tf.data.AUTOTUNE,
                                   deterministic=self.config.deterministic)
        if shuffle:
            records = records.shuffle(self.config.shuffle_buffer_size, seed=seed)
        return records.map(self._decode, tf.data.AUTOTUNE, deterministic=self.config.deterministic)

    def _evaluation_examples(self, shards, total):
        padding = tf.data.Dataset.from_tensors((tf.zeros(self.image_shape, tf.uint8), tf.constant(PAD_LABEL))).repeat()
        return self._decoded(shards).concatenate(padding).take(total)


LABEL_MODES = ('int', 'categorical')


def _image_size(image_size):
    """``image_size`` (N or (height, width)) as (height, width); a mistake is a one-line UserError."""
    size = (image_size, image_size) if isinstance(image_size, int) and not isinstance(image_size, bool) else image_size
    try:
        height, width = size
    except (TypeError, ValueError):
        height = width = None
    if not all(isinstance(side, int) and not isinstance(side, bool) and side >= 1 for side in (height, width)):
        raise UserError(f'image_size must be N or (height, width) of positive whole numbers, got {image_size!r}')
    return height, width


def load(data, split='train', *, version=None, batch_size=None, image_size=None, crop_to_aspect_ratio=False,
         pad_to_aspect_ratio=False, label_mode='int', shuffle=True, seed=None, as_supervised=True, with_info=False,
         verbose=True):
    """A version's split as a ``tf.data.Dataset`` of (uint8 image [H, W, 3], int32 label), for a notebook or
    ``model.fit``: the reader training uses, every record once a pass. Its ``class_names`` are the labels'
    names, as ``image_dataset_from_directory``'s.

    ``data``: OUT (the version LATEST names) or OUT/VERSION, local or gs://; ``version``: a version of OUT.
    ``batch_size``: batches of that many (the last one smaller); ``image_size``: N or (height, width) to
    resize to (stretched, or ``crop_to_aspect_ratio``/``pad_to_aspect_ratio``), default the stored size;
    ``label_mode='categorical'``: one-hot float32 labels; ``shuffle``: the shard order and a window of
    records (``InputConfig.shuffle_buffer_size``), anew each pass, by ``seed`` when given;
    ``as_supervised=False``: {'image': ..., 'label': ...} dicts; ``with_info``: returns (dataset,
    ``DatasetInfo``), as ``tfds.load``; ``verbose``: prints one line of what was found. A mistake (no such
    version or split, a damaged shard listing, a bad argument) raises UserError or DataError with a
    one-line message.
    """
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise UserError(f'batch_size must be a positive whole number, got {batch_size!r}')
    size = None if image_size is None else _image_size(image_size)
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise UserError('crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set')
    if label_mode not in LABEL_MODES:
        raise UserError(f"label_mode must be one of {', '.join(LABEL_MODES)}, got {label_mode!r}")
    source, lease = leased_version(data, version)
    try:
        source.check_split(split)
        source.check_shards([split])
    except Exception:
        if lease is not None:
            lease.release_quietly()
        raise
    reader = InputReader(source, InputConfig(split=split, global_batch_size=batch_size or 1, is_training=False,
                                             augment=False))
    # A known length: len() works, Keras counts its steps, and a split with fewer records fails the pass.
    examples = reader.examples(shuffle=shuffle, seed=seed).apply(
        tf.data.experimental.assert_cardinality(reader.num_examples))
    if size is not None and size != tuple(source.image_shape[:2]):
        mode = 'crop' if crop_to_aspect_ratio else 'pad' if pad_to_aspect_ratio else 'stretch'
        examples = examples.map(lambda image, label: (images.fit(image, size, mode), label),
                                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if label_mode == 'categorical':
        depth = len(source.labels)
        examples = examples.map(lambda image, label: (image, tf.one_hot(label, depth)))
    if not as_supervised:
        examples = examples.map(lambda image, label: {'image': image, 'label': label})
    if batch_size is not None:
        examples = examples.batch(batch_size)
    examples = examples.prefetch(tf.data.AUTOTUNE)
    examples.class_names = source.labels
    if verbose:
        print(f'Found {reader.num_examples} images belonging to {len(source.labels)} classes in split {split!r} '
              f'of {source.directory}.')
    leases.held_while(examples, lease)  # renewed while the dataset is alive: a pruning leaves the version alone
    return (examples, DatasetInfo.of(source)) if with_info else examples


def leased_version(data, version=None):
    """(``DatasetVersion``, its reader lease or None): the version opened as ``dataset_version.open_version``
    opens it, with a reader lease on it (``imgrec.storage.leases.reader_lease``), so that a build's
    --keep_versions does not delete it while it is read; opened again if a pruning got to it first."""
    try:
        return leases.resolve_leased(lambda: dataset_version.open_version(data, version),
                                     lambda source: (source.root, source.version))
    except leases.Pruned as error:
        raise DataError(f'{error}, three times: run again') from None


def _counted_records(path, records):
    """A shard's serialised records; reading one more than ``records`` fails with InvalidArgumentError."""
    def check(index, serialized):
        message = 'a shard holds more records than dataset.json says'
        with tf.control_dependencies([tf.debugging.assert_less(index, tf.cast(records, tf.int64), message=message)]):
            return tf.identity(serialized)
    return tf.data.TFRecordDataset(path).enumerate().map(check)
