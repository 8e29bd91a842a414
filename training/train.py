"""Trains a classifier on a published dataset, on whatever accelerator this machine has.

    python -m training.train --data OUTPUT --epochs N --batch_size B [--model_dir DIR] [options]

Reads ``OUTPUT/LATEST`` (or ``--version``), trains on ``--train_split`` through
``strategy.distribute_datasets_from_function``, evaluates on ``--eval_split`` after every epoch and
prints one line per epoch. Checkpoints go to ``--model_dir`` every epoch (and every
``--checkpoint_steps``); running again with the same ``--model_dir`` resumes where the last checkpoint
left off, at the same position in the data. The model is exported as a SavedModel at the end.
"""
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # before TensorFlow loads: keep its C++ start-up chatter quiet

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from tensorflow.core.framework import summary_pb2  # noqa: E402

from contract import layout  # noqa: E402
from training import dataset, dataset_version, export, input_profile, loop, model as model_lib  # noqa: E402
from training import run_state, strategy as strategy_lib  # noqa: E402
from training.errors import UserError  # noqa: E402

log = logging.getLogger('training')

PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')
TPU_PER_REPLICA_BATCH = 128  # the Cloud TPU codelab's recommendation
DEFAULT_PER_REPLICA_BATCH = 32
TPU_STEPS_PER_EXECUTION = 32


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(message)


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


def _parser():
    parser = _Parser(prog='train-model', description=__doc__.splitlines()[0])
    data = parser.add_argument_group('data')
    data.add_argument('--data', required=True, help='dataset output folder or gs:// prefix (holds LATEST)')
    data.add_argument('--version', help='dataset version to read (default: the one LATEST names)')
    data.add_argument('--train_split', default='train')
    data.add_argument('--eval_split', default='validation')
    data.add_argument('--cache', action='store_true', help='keep decoded images in memory after the first epoch')
    data.add_argument('--augment', action=argparse.BooleanOptionalAction, default=True,
                      help='random horizontal flips of training images (default on)')
    data.add_argument('--seed', type=int, default=0, help='seeds file order, shuffling and augmentation')
    data.add_argument('--shuffle_buffer', type=_positive, default=1024, help='records in the shuffle buffer')
    data.add_argument('--cycle_length', type=_positive, help='shards read at once (default: all, up to 16)')
    data.add_argument('--block_length', type=_positive, default=1, help='records taken from a shard in turn')
    data.add_argument('--deterministic', action=argparse.BooleanOptionalAction, default=True,
                      help='fixed record order (default on; needed for an exact mid-epoch resume)')
    run = parser.add_argument_group('training')
    run.add_argument('--model', choices=sorted(model_lib.MODELS), default='small_cnn')
    run.add_argument('--epochs', type=_positive, default=10)
    run.add_argument('--batch_size', type=_positive,
                     help=f'global batch size (default: {TPU_PER_REPLICA_BATCH} per replica on TPU, '
                          f'{DEFAULT_PER_REPLICA_BATCH} per replica otherwise)')
    run.add_argument('--learning_rate', type=float, default=3e-3,
                     help='initial Adam learning rate, decayed to 0 over the run (cosine)')
    run.add_argument('--model_dir', help='checkpoints, logs and export, local or gs:// (default: runs/<time>)')
    run.add_argument('--checkpoint_steps', type=int, default=0, help='also checkpoint every N steps (0: per epoch)')
    device = parser.add_argument_group('accelerator')
    device.add_argument('--tpu', help="Cloud TPU name, grpc://host:port, or 'local' on a TPU VM (default: TPU_NAME)")
    device.add_argument('--mixed_precision', choices=PRECISIONS,
                        help='Keras dtype policy (default: mixed_bfloat16 on TPU, float32 otherwise)')
    device.add_argument('--steps_per_execution', type=_positive,
                        help=f'steps per host call (default: {TPU_STEPS_PER_EXECUTION} on TPU, 1 otherwise)')
    device.add_argument('--jit_compile', action='store_true', help='compile the step with XLA on CPU/GPU')
    device.add_argument('--profile_input', action='store_true',
                        help='only iterate the training input pipeline and print its speed')
    device.add_argument('--profile_steps', type=_positive,
                        help='global batches to profile (default and most: one epoch)')
    return parser


def main(argv=None):
    console = logging.StreamHandler(sys.stdout)  # our progress on stdout; TensorFlow's INFO logging stays off
    log.addHandler(console)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        train(_parser().parse_args(argv))
    except UserError as error:
        print(f'train-model: error: {error}', file=sys.stderr)
        return 2
    finally:
        log.removeHandler(console)
    return 0


def train(args):
    """Runs (or resumes, or only profiles) the training that ``args`` describe."""
    model_dir = args.model_dir or os.path.join('runs', datetime.datetime.now(datetime.timezone.utc).strftime(
        layout.VERSION_FORMAT))
    source, accelerator = _resolve(args, model_dir)
    train_reader, eval_reader, global_batch = _readers(args, source, accelerator)
    if args.profile_input:
        _profile_input(args, accelerator, train_reader, global_batch)
        return
    run_state.pin_settings(model_dir, {'dataset_version': source.version, 'global_batch_size': global_batch,
                                       'seed': args.seed, 'num_input_pipelines': accelerator.num_input_pipelines,
                                       'model': args.model})
    steps_per_epoch = train_reader.steps_per_epoch(accelerator.num_input_pipelines)
    model, optimizer = _model_and_optimizer(args, source, accelerator, steps_per_epoch)
    checkpoints = run_state.Checkpoints(model_dir, model, optimizer)
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
    path = export.export_saved_model(model, layout.join(model_dir, 'export', str(int(checkpoints.step.numpy()))),
                                     labels=source.labels, image_shape=source.image_shape,
                                     resize_mode=source.resize_mode)
    print(f'exported SavedModel to {path}', flush=True)


def _resolve(args, model_dir):
    """(dataset version, accelerator), checking paths and splits before any TPU is contacted."""
    target = strategy_lib.find_tpu(args.tpu)
    strategy_lib.check_storage(target, data=args.data, model_dir=model_dir)
    pinned_version = run_state.read_settings(model_dir).get('dataset_version')
    source = dataset_version.open_version(args.data, args.version or pinned_version)
    for split in (args.train_split, args.eval_split):
        source.check_split(split)
    accelerator = strategy_lib.create(target)
    keras.mixed_precision.set_global_policy(
        args.mixed_precision or ('mixed_bfloat16' if accelerator.kind == 'tpu' else 'float32'))
    return source, accelerator


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
    start = int(checkpoints.step.numpy())
    for epoch in range(start // steps_per_epoch, args.epochs):
        epoch_start = time.perf_counter()
        first = done = start % steps_per_epoch if epoch == start // steps_per_epoch else 0
        iterator = iter(strategy.distribute_datasets_from_function(
            functools.partial(train_reader.dataset, epoch=epoch, start_step=done)))
        totals = tf.zeros([3])
        while done < steps_per_epoch:
            # One host call runs up to `execution` steps, ending at the epoch and at every step checkpoint.
            step = epoch * steps_per_epoch + done
            count = min(execution, steps_per_epoch - done)
            if args.checkpoint_steps > 0:
                count = min(count, args.checkpoint_steps - step % args.checkpoint_steps)
            totals += steps.train(iterator, tf.constant(count))
            done += count
            if args.checkpoint_steps > 0 and (step + count) % args.checkpoint_steps == 0 and done < steps_per_epoch:
                checkpoints.save(step + count)
        train_seconds = time.perf_counter() - epoch_start
        checkpoints.save((epoch + 1) * steps_per_epoch)
        evaluation = steps.evaluate(iter(eval_data), tf.constant(eval_steps))
        _report(epoch, args.epochs, (epoch + 1) * steps_per_epoch, totals.numpy(), evaluation.numpy(),
                train_seconds, time.perf_counter() - epoch_start, (done - first) * global_batch, writers)


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


if __name__ == '__main__':
    sys.exit(main())
