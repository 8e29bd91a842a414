"""The training run behind ``train-model``: accelerator, input, model, the epoch loop, and the export.

``imgrec.training.train`` has parsed and checked the arguments and the dataset; this module imports TensorFlow.
A pass over a split that TensorFlow's reader cannot finish (a bad checksum, a short shard, a record count
that disagrees with ``dataset.json``) and a loss that stops being finite end the run with one line
(``DataError``), and nothing is exported.
"""
import contextlib
import functools
import logging
import math
import re
import time
import typing

import keras
import numpy as np
import tensorflow as tf

from tensorflow.core.framework import summary_pb2

from imgrec.contract import layout
from imgrec.console.errors import DataError, UserError
from imgrec.training import dataset, export, input_profile, loop, model as model_lib, record_check
from imgrec.training import run_state, strategy as strategy_lib
from imgrec.training.checkpoints import Checkpoints
from imgrec.training.config import TrainConfig
from imgrec.training.dataset_version import DatasetVersion
from imgrec.training.epoch_progress import Progress
from imgrec.training.batching import DEFAULT_PER_REPLICA_BATCH, TPU_PER_REPLICA_BATCH, TPU_STEPS_PER_EXECUTION

log = logging.getLogger('imgrec.training')

# Training images whose batch statistics set the batch normalisation layers' moving statistics after every
# epoch (at most an epoch's): pycls' default for its precise BN.
NORM_STATISTICS_IMAGES = 8192


class Inputs(typing.NamedTuple):
    """The run's two readers and its global batch size (images of one step over all replicas)."""
    train: dataset.InputReader
    evaluation: dataset.InputReader
    global_batch: int


def train(config: TrainConfig, source: DatasetVersion) -> None:
    """Runs (or resumes, or only profiles) the training ``config`` (a TrainConfig) describes on ``source``."""
    if config.model not in model_lib.MODELS:
        raise UserError(f"--model {config.model!r} is not one of {', '.join(sorted(model_lib.MODELS))}")
    accelerator = _accelerator(config)
    inputs = _inputs(config, source, accelerator)
    if config.profile_input:
        _profile_input(config, accelerator, inputs)
        return
    run_state.pin_settings(config.model_dir, {
        'dataset_version': source.version, 'global_batch_size': inputs.global_batch, 'seed': config.seed,
        'num_input_pipelines': accelerator.num_input_pipelines, 'model': config.model})
    steps_per_epoch = inputs.train.steps_per_epoch(accelerator.num_input_pipelines)
    model, optimizer = _model_and_optimizer(config, source, accelerator, steps_per_epoch)
    checkpoints = Checkpoints(config.model_dir, model, optimizer)
    start = checkpoints.restore()
    log.info('data: %s version %s, %d training steps of %d images per epoch', source.root, source.version,
             steps_per_epoch, inputs.global_batch)
    log.info('model: %s, %d parameters, %s; model_dir %s', config.model, model.count_params(),
             keras.mixed_precision.global_policy().name, config.model_dir)
    if start >= config.epochs * steps_per_epoch:
        log.info('%s already holds %d steps (%s of %d steps), and --epochs %d needs %d: nothing to train',
                 config.model_dir, start, held_epochs(start, steps_per_epoch), steps_per_epoch, config.epochs,
                 config.epochs * steps_per_epoch)
    elif start:
        log.info('resuming from step %d: epoch %d, step %d of %d', start, start // steps_per_epoch + 1,
                 start % steps_per_epoch, steps_per_epoch)
    _fit(config, accelerator, inputs, model, optimizer, checkpoints)
    export_start = time.perf_counter()
    path = export.export_saved_model(
        model, layout.join(config.model_dir, 'export', str(int(checkpoints.step.numpy()))),
        labels=source.labels, image_shape=source.image_shape, resize_mode=source.resize_mode)
    log.info('exported SavedModel to %s in %.1f s', path, time.perf_counter() - export_start)


def held_epochs(steps: int, steps_per_epoch: int) -> str:
    """``steps`` in epochs of ``steps_per_epoch``, as '8 epoch(s)' or '7 epoch(s) and 8 step(s)': a finished
    run resumed with fewer --epochs must say how many it holds, not how many were asked."""
    epochs, rest = divmod(steps, steps_per_epoch)
    return f'{epochs} epoch(s)' + (f' and {rest} step(s)' if rest else '')


def _accelerator(config):
    """The accelerator, checking that a TPU node can reach the paths before it is contacted."""
    target = strategy_lib.find_tpu(config.tpu)
    strategy_lib.check_storage(target, data=config.data, model_dir=config.model_dir)
    accelerator = strategy_lib.create(target)
    keras.mixed_precision.set_global_policy(
        config.mixed_precision or ('mixed_bfloat16' if accelerator.kind == 'tpu' else 'float32'))
    return accelerator


def _inputs(config, source, accelerator):
    """The training and evaluation readers, and the global batch size."""
    per_replica = TPU_PER_REPLICA_BATCH if accelerator.kind == 'tpu' else DEFAULT_PER_REPLICA_BATCH
    global_batch = config.batch_size or per_replica * accelerator.num_replicas
    if global_batch % accelerator.num_replicas:
        raise UserError(f'--batch_size {global_batch} is not divisible by the {accelerator.num_replicas} replicas')
    readers = [dataset.InputReader(source, dataset.InputConfig(
        split=split, global_batch_size=global_batch, is_training=training, seed=config.seed,
        shuffle_buffer_size=config.shuffle_buffer, cycle_length=config.cycle_length,
        block_length=config.block_length, deterministic=config.deterministic, cache=config.cache,
        augment=config.augment, max_shift=config.max_shift))
        for split, training in ((config.train_split, True), (config.eval_split, False))]
    for reader in readers:
        reader.steps_per_epoch(accelerator.num_input_pipelines)  # refuses too few shards or records now
    train_reader, evaluation_reader = readers
    return Inputs(train_reader, evaluation_reader, global_batch)


def _profile_input(config, accelerator, inputs):
    steps_per_epoch = inputs.train.steps_per_epoch(accelerator.num_input_pipelines)
    steps = min(config.profile_steps or steps_per_epoch, steps_per_epoch)
    with _naming_damaged_shards(inputs.train):
        first, rate = input_profile.profile(
            accelerator.strategy.distribute_datasets_from_function(inputs.train.dataset), steps, inputs.global_batch)
    print(f'input pipeline: first batch after {first:.2f} s, then {rate:.0f} images/s '
          f'over {steps - 1} batches of {inputs.global_batch}', flush=True)


def _model_and_optimizer(config, source, accelerator, steps_per_epoch):
    keras.utils.set_random_seed(config.seed)  # the same --seed starts from the same weights
    with accelerator.strategy.scope():
        model = model_lib.build_model(config.model, source.image_shape, len(source.labels))
        schedule = keras.optimizers.schedules.CosineDecay(config.initial_learning_rate, config.epochs * steps_per_epoch)
        optimizer = keras.optimizers.Adam(schedule)
        if keras.mixed_precision.global_policy().name == 'mixed_float16':
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return model, optimizer


class Epoch(typing.NamedTuple):
    """What one epoch did, as its line and TensorBoard report it."""
    number: int  # counted from 1
    global_step: int  # at its end
    train_sums: np.ndarray  # (loss, correct, count), summed over the steps this run trained
    eval_sums: np.ndarray  # the same over the evaluation split
    train_seconds: float
    seconds: float  # training and evaluation
    images: int  # trained on by this run (fewer than an epoch's when it resumed mid-epoch)


def _fit(config, accelerator, inputs, model, optimizer, checkpoints):
    """Trains from the checkpointed step to the last epoch, evaluating and reporting after each."""
    strategy, pipelines = accelerator.strategy, accelerator.num_input_pipelines
    train_reader, eval_reader, global_batch = inputs
    steps_per_epoch, eval_steps = train_reader.steps_per_epoch(pipelines), eval_reader.steps_per_epoch(pipelines)
    on_tpu = accelerator.kind == 'tpu'
    steps = loop.DistributedSteps(strategy, model, optimizer, global_batch,
                                  jit_compile=config.jit_compile and not on_tpu)
    execution = config.steps_per_execution or (TPU_STEPS_PER_EXECUTION if on_tpu else 1)
    eval_data = strategy.distribute_datasets_from_function(eval_reader.dataset)
    writers = {name: tf.summary.create_file_writer(layout.join(config.model_dir, 'logs', name))
               for name in ('train', 'validation')}
    progress = Progress(None if config.quiet else config.progress_seconds)
    every = config.checkpoint_steps
    norm_steps = min(steps_per_epoch, -(-NORM_STATISTICS_IMAGES // global_batch))
    start = int(checkpoints.step.numpy())
    for epoch in range(start // steps_per_epoch, config.epochs):
        epoch_start = time.perf_counter()
        first = done = start % steps_per_epoch if epoch == start // steps_per_epoch else 0
        progress.start_epoch(epoch, config.epochs, steps_per_epoch)
        iterator = iter(strategy.distribute_datasets_from_function(
            functools.partial(train_reader.dataset, epoch=epoch, start_step=done)))
        totals = np.zeros(3)
        while done < steps_per_epoch:
            # One host call runs up to `execution` steps, ending at the epoch and at every step checkpoint.
            step = epoch * steps_per_epoch + done
            count = min(execution, steps_per_epoch - done)
            if every:
                count = min(count, every - step % every)
            with _naming_damaged_shards(train_reader):
                sums = steps.train(iterator, tf.constant(count)).numpy()
            if not math.isfinite(sums[0]):
                last = f'step {step + 1}' if count == 1 else f'steps {step + 1}-{step + count}'
                raise DataError(f'the training loss became {sums[0]} at {last}; stopped before checkpointing or '
                                'exporting that model: lower --learning_rate, or check the data')
            totals += sums
            done += count
            if done < steps_per_epoch:  # the epoch line follows at once otherwise
                progress.update(done, (done - first) * global_batch, totals[0] / totals[2])
            if every and (step + count) % every == 0 and done < steps_per_epoch:
                checkpoints.save(step + count)
        train_seconds = time.perf_counter() - epoch_start
        with _naming_damaged_shards(train_reader):  # before evaluating and checkpointing: loop's docstring says why
            steps.recompute_norm_statistics(iter(strategy.distribute_datasets_from_function(
                functools.partial(train_reader.dataset, epoch=epoch))), tf.constant(norm_steps))
        checkpoints.save((epoch + 1) * steps_per_epoch)
        with _naming_damaged_shards(eval_reader):
            evaluation = steps.evaluate(iter(eval_data), tf.constant(eval_steps)).numpy()
        if int(evaluation[2]) != eval_reader.num_examples:
            _raise_damaged(eval_reader, f'evaluation read {int(evaluation[2])} records, dataset.json counts '
                                        f'{eval_reader.num_examples}')
        progress.finish()
        _report(Epoch(epoch + 1, (epoch + 1) * steps_per_epoch, totals, evaluation, train_seconds,
                      time.perf_counter() - epoch_start, (done - first) * global_batch), config.epochs, writers)


@contextlib.contextmanager
def _naming_damaged_shards(reader):
    """Turns TensorFlow's reader errors on ``reader``'s split into a ``DataError`` naming the damaged shard."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.InvalidArgumentError) as error:
        _raise_damaged(reader, f'TensorFlow: {tensorflow_message(error)}')


def _raise_damaged(reader, symptom):
    """A DataError naming the shard and record ``record_check`` finds at fault, with ``symptom``."""
    problem = record_check.first_problem(reader.shards, reader.image_shape, reader.num_labels)
    if problem is None:
        raise DataError(f'reading split {reader.config.split!r} failed: {symptom}')
    raise DataError(f'split {reader.config.split!r} is damaged: {problem} ({symptom}); rebuild this dataset version')


# What TensorFlow wraps its own message in: the function it ran, the op, the node lines.
_TF_FUNCTION = re.compile(r'^(?:\{\{function_node [^}]*\}\}\s*)+')
_TF_OP = re.compile(r'\s*\[Op:[^\]]*\].*$')


def tensorflow_message(error):
    """TensorFlow's own words in one of its errors, on one line: not 'Graph execution error:', not the
    'Detected at node' trace ('<stack traces unavailable>') or the '[[{{node ...}}]]' lines, but 'Shape of
    tensor ... is not compatible...'."""
    for line in (getattr(error, 'message', None) or str(error)).splitlines():
        if not line.strip() or line[:1].isspace() or line.rstrip().endswith('execution error:') \
                or line.startswith('Detected at node') or line.startswith('<') and line.rstrip().endswith('>'):
            continue
        message = _TF_OP.sub('', _TF_FUNCTION.sub('', line.strip()))
        if message:
            return message
    return type(error).__name__


def _report(epoch, epochs, writers):
    """Prints ``epoch``'s line (an Epoch of ``epochs``) and writes the same numbers to TensorBoard."""
    train_loss, train_correct, train_count = epoch.train_sums
    eval_loss, eval_correct, eval_count = epoch.eval_sums
    rate = epoch.images / epoch.train_seconds
    epoch_seconds, global_step = epoch.seconds, epoch.global_step
    print(f'epoch {epoch.number}/{epochs}: train loss {train_loss / train_count:.4f} '
          f'acc {100 * train_correct / train_count:.2f}% | val loss {eval_loss / eval_count:.4f} '
          f'acc {int(eval_correct)}/{int(eval_count)} = {100 * eval_correct / eval_count:.2f}% | '
          f'{epoch_seconds:.1f} s, {rate:.0f} images/s', flush=True)
    scalars = {'train': {'loss': train_loss / train_count, 'accuracy': train_correct / train_count,
                         'images_per_second': rate, 'epoch_seconds': epoch_seconds},
               'validation': {'loss': eval_loss / eval_count, 'accuracy': eval_correct / eval_count}}
    for name, values in scalars.items():
        with writers[name].as_default(step=global_step):
            for key, value in values.items():
                _scalar(key, value)
        writers[name].flush()


# TensorBoard's scalar plugin marker. ``tf.summary.scalar`` lives in the tensorboard package, which
# tensorflow-cpu no longer installs; the core ``tf.summary.write`` with this metadata writes the same event.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name='scalars'))


def _scalar(name, value):
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
