"""The training run behind ``train-model``: accelerator, input, model, the epoch loop, and the export.

``training.train`` has parsed and checked the arguments and the dataset; this module imports TensorFlow.
A pass over a split that TensorFlow's reader cannot finish (a bad checksum, a short shard, a record count
that disagrees with ``dataset.json``) and a loss that stops being finite end the run with one line
(``DataError``), and nothing is exported.
"""
import contextlib
import functools
import logging
import math
import time

import keras
import numpy as np
import tensorflow as tf

from tensorflow.core.framework import summary_pb2

from contract import layout
from training import dataset, export, input_profile, loop, model as model_lib, record_check
from training import run_state, strategy as strategy_lib
from training.checkpoints import Checkpoints
from training.errors import DataError, UserError
from training.progress import Progress
from training.batching import DEFAULT_PER_REPLICA_BATCH, TPU_PER_REPLICA_BATCH, TPU_STEPS_PER_EXECUTION

log = logging.getLogger('training')


def train(args, source, model_dir):
    """Runs (or resumes, or only profiles) the training that ``args`` describe on ``source``."""
    if args.model not in model_lib.MODELS:
        raise UserError(f"--model {args.model!r} is not one of {', '.join(sorted(model_lib.MODELS))}")
    accelerator = _accelerator(args, model_dir)
    train_reader, eval_reader, global_batch = _readers(args, source, accelerator)
    if args.profile_input:
        _profile_input(args, accelerator, train_reader, global_batch)
        return
    run_state.pin_settings(model_dir, {'dataset_version': source.version, 'global_batch_size': global_batch,
                                       'seed': args.seed, 'num_input_pipelines': accelerator.num_input_pipelines,
                                       'model': args.model})
    steps_per_epoch = train_reader.steps_per_epoch(accelerator.num_input_pipelines)
    model, optimizer = _model_and_optimizer(args, source, accelerator, steps_per_epoch)
    checkpoints = Checkpoints(model_dir, model, optimizer)
    start = checkpoints.restore()
    log.info('data: %s version %s, %d training steps of %d images per epoch', source.root, source.version,
             steps_per_epoch, global_batch)
    log.info('model: %s, %d parameters, %s; model_dir %s', args.model, model.count_params(),
             keras.mixed_precision.global_policy().name, model_dir)
    if start >= args.epochs * steps_per_epoch:
        log.info('%s already holds all %d steps of %d epoch(s): nothing to train', model_dir, start, args.epochs)
    elif start:
        log.info('resuming from step %d: epoch %d, step %d of %d', start, start // steps_per_epoch + 1,
                 start % steps_per_epoch, steps_per_epoch)
    _fit(args, accelerator, model, optimizer, checkpoints, train_reader, eval_reader, global_batch, model_dir)
    export_start = time.perf_counter()
    path = export.export_saved_model(model, layout.join(model_dir, 'export', str(int(checkpoints.step.numpy()))),
                                     labels=source.labels, image_shape=source.image_shape,
                                     resize_mode=source.resize_mode)
    log.info('exported SavedModel to %s in %.1f s', path, time.perf_counter() - export_start)


def _accelerator(args, model_dir):
    """The accelerator, checking that a TPU node can reach the paths before it is contacted."""
    target = strategy_lib.find_tpu(args.tpu)
    strategy_lib.check_storage(target, data=args.data, model_dir=model_dir)
    accelerator = strategy_lib.create(target)
    keras.mixed_precision.set_global_policy(
        args.mixed_precision or ('mixed_bfloat16' if accelerator.kind == 'tpu' else 'float32'))
    return accelerator


def _readers(args, source, accelerator):
    """(training reader, evaluation reader, global batch size)."""
    per_replica = TPU_PER_REPLICA_BATCH if accelerator.kind == 'tpu' else DEFAULT_PER_REPLICA_BATCH
    global_batch = args.batch_size or per_replica * accelerator.num_replicas
    if global_batch % accelerator.num_replicas:
        raise UserError(f'--batch_size {global_batch} is not divisible by the {accelerator.num_replicas} replicas')
    readers = [dataset.InputReader(source, dataset.InputConfig(
        split=split, global_batch_size=global_batch, is_training=training, seed=args.seed,
        shuffle_buffer_size=args.shuffle_buffer, cycle_length=args.cycle_length, block_length=args.block_length,
        deterministic=args.deterministic, cache=args.cache, augment=args.augment))
        for split, training in ((args.train_split, True), (args.eval_split, False))]
    for reader in readers:
        reader.steps_per_epoch(accelerator.num_input_pipelines)  # refuses too few shards or records now
    return (*readers, global_batch)


def _profile_input(args, accelerator, reader, global_batch):
    steps_per_epoch = reader.steps_per_epoch(accelerator.num_input_pipelines)
    steps = min(args.profile_steps or steps_per_epoch, steps_per_epoch)
    with _naming_damaged_shards(reader):
        first, rate = input_profile.profile(accelerator.strategy.distribute_datasets_from_function(reader.dataset),
                                            steps, global_batch)
    print(f'input pipeline: first batch after {first:.2f} s, then {rate:.0f} images/s '
          f'over {steps - 1} batches of {global_batch}', flush=True)


def _model_and_optimizer(args, source, accelerator, steps_per_epoch):
    keras.utils.set_random_seed(args.seed)  # the same --seed starts from the same weights
    with accelerator.strategy.scope():
        model = model_lib.build_model(args.model, source.image_shape, len(source.labels))
        schedule = keras.optimizers.schedules.CosineDecay(args.learning_rate, args.epochs * steps_per_epoch)
        optimizer = keras.optimizers.Adam(schedule)
        if keras.mixed_precision.global_policy().name == 'mixed_float16':
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def _fit(args, accelerator, model, optimizer, checkpoints, train_reader, eval_reader, global_batch, model_dir):
    """Trains from the checkpointed step to the last epoch, evaluating and reporting after each."""
    strategy, pipelines = accelerator.strategy, accelerator.num_input_pipelines
    steps_per_epoch, eval_steps = train_reader.steps_per_epoch(pipelines), eval_reader.steps_per_epoch(pipelines)
    on_tpu = accelerator.kind == 'tpu'
    steps = loop.DistributedSteps(strategy, model, optimizer, global_batch, jit_compile=args.jit_compile and not on_tpu)
    execution = args.steps_per_execution or (TPU_STEPS_PER_EXECUTION if on_tpu else 1)
    eval_data = strategy.distribute_datasets_from_function(eval_reader.dataset)
    writers = {name: tf.summary.create_file_writer(layout.join(model_dir, 'logs', name))
               for name in ('train', 'validation')}
    progress = Progress(None if args.quiet else args.progress_seconds)
    start = int(checkpoints.step.numpy())
    for epoch in range(start // steps_per_epoch, args.epochs):
        epoch_start = time.perf_counter()
        first = done = start % steps_per_epoch if epoch == start // steps_per_epoch else 0
        progress.start_epoch(epoch, args.epochs, steps_per_epoch)
        iterator = iter(strategy.distribute_datasets_from_function(
            functools.partial(train_reader.dataset, epoch=epoch, start_step=done)))
        totals = np.zeros(3)
        while done < steps_per_epoch:
            # One host call runs up to `execution` steps, ending at the epoch and at every step checkpoint.
            step = epoch * steps_per_epoch + done
            count = min(execution, steps_per_epoch - done)
            if args.checkpoint_steps:
                count = min(count, args.checkpoint_steps - step % args.checkpoint_steps)
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
            if args.checkpoint_steps and (step + count) % args.checkpoint_steps == 0 and done < steps_per_epoch:
                checkpoints.save(step + count)
        train_seconds = time.perf_counter() - epoch_start
        checkpoints.save((epoch + 1) * steps_per_epoch)
        with _naming_damaged_shards(eval_reader):
            evaluation = steps.evaluate(iter(eval_data), tf.constant(eval_steps)).numpy()
        if int(evaluation[2]) != eval_reader.num_examples:
            _raise_damaged(eval_reader, f'evaluation read {int(evaluation[2])} records, dataset.json counts '
                                        f'{eval_reader.num_examples}')
        progress.finish()
        _report(epoch, args.epochs, (epoch + 1) * steps_per_epoch, totals, evaluation,
                train_seconds, time.perf_counter() - epoch_start, (done - first) * global_batch, writers)


@contextlib.contextmanager
def _naming_damaged_shards(reader):
    """Turns TensorFlow's reader errors on ``reader``'s split into a ``DataError`` naming the damaged shard."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.InvalidArgumentError) as error:
        _raise_damaged(reader, (str(error).strip().splitlines() or [type(error).__name__])[0])


def _raise_damaged(reader, symptom):
    problem = record_check.first_problem(reader.shards)
    if problem is None:
        raise DataError(f'reading split {reader.config.split!r} failed: {symptom}')
    raise DataError(f'split {reader.config.split!r} is damaged: {problem}; rebuild this dataset version')


def _report(epoch, epochs, global_step, train_sums, eval_sums, train_seconds, epoch_seconds, images, writers):
    """Prints the epoch's line and writes the same numbers to TensorBoard."""
    train_loss, train_correct, train_count = train_sums
    eval_loss, eval_correct, eval_count = eval_sums
    rate = images / train_seconds
    print(f'epoch {epoch + 1}/{epochs}: train loss {train_loss / train_count:.4f} '
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
