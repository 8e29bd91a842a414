"""Trains a classifier on a published dataset, on whatever accelerator this machine has.

    train-model --data OUTPUT --epochs N --batch_size B [--model_dir DIR] [options]

Reads ``OUTPUT/LATEST`` (or ``--version``), trains on ``--train_split`` through
``strategy.distribute_datasets_from_function``, evaluates on ``--eval_split`` after every epoch and
prints one line per epoch, with progress lines between them. Checkpoints go to ``--model_dir`` every
epoch (and every ``--checkpoint_steps``); running again with the same ``--model_dir`` resumes where the
last checkpoint left off, at the same position in the data. The model is exported as a SavedModel at
the end.

This module is the command line: it parses the arguments and checks the dataset (its shard files exist
with the sizes ``dataset.json`` gives) before TensorFlow is imported, so ``--help`` and mistakes are
answered at once, in one line; ``training.trainer`` does the rest.
"""
import argparse
import datetime
import logging
import math
import os
import sys

from contract import layout
from training import dataset_version, native_logs, run_state
from training.batching import DEFAULT_PER_REPLICA_BATCH, TPU_PER_REPLICA_BATCH, TPU_STEPS_PER_EXECUTION
from training.errors import UserError

log = logging.getLogger('training')

PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')
BUILT_IN_MODELS = 'small_cnn, mobilenet_v2 or resnet50'  # training.model.MODELS, named without importing Keras


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(message)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default, unless its help already says it or it has none."""

    def _get_help_string(self, action):
        text = action.help or ''
        if action.option_strings and action.default not in (None, argparse.SUPPRESS) and 'default' not in text:
            text += ' (default: %(default)s)'
        return text


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'must be a whole number, got {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


def _positive_finite(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'must be a number, got {text!r}') from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f'must be a positive finite number, got {text}')
    return value


def _parser():
    description = __doc__.split('\n\nThis module')[0].replace('``', '')
    parser = _Parser(prog='train-model', description=description, formatter_class=_Formatter)
    data = parser.add_argument_group('data')
    data.add_argument('--data', required=True, help='dataset output folder or gs:// prefix (holds LATEST)')
    data.add_argument('--version', help='dataset version to read (default: the one a resumed --model_dir was '
                                        'trained on, else the one LATEST names)')
    data.add_argument('--train_split', default='train', help='split to train on')
    data.add_argument('--eval_split', default='validation', help='split evaluated after every epoch')
    data.add_argument('--cache', action='store_true', help='keep decoded images in memory after the first epoch')
    data.add_argument('--augment', action=argparse.BooleanOptionalAction, default=True,
                      help='random horizontal flips of training images')
    data.add_argument('--seed', type=int, default=0, help='seeds file order, shuffling, augmentation and weights')
    data.add_argument('--shuffle_buffer', type=_positive, default=1024, help='records in the shuffle buffer')
    data.add_argument('--cycle_length', type=_positive, help='shards read at once (default: all, up to 16)')
    data.add_argument('--block_length', type=_positive, default=1, help='records taken from a shard in turn')
    data.add_argument('--deterministic', action=argparse.BooleanOptionalAction, default=True,
                      help='fixed record order (needed for an exact mid-epoch resume)')
    run = parser.add_argument_group('training')
    run.add_argument('--model', default='small_cnn', help=f'network: {BUILT_IN_MODELS}')
    run.add_argument('--epochs', type=_positive, default=10, help='passes over the training split')
    run.add_argument('--batch_size', type=_positive,
                     help=f'global batch size (default: {TPU_PER_REPLICA_BATCH} per replica on TPU, '
                          f'{DEFAULT_PER_REPLICA_BATCH} per replica otherwise)')
    run.add_argument('--learning_rate', type=_positive_finite, default=3e-3,
                     help='initial Adam learning rate, decayed to 0 over the run (cosine)')
    run.add_argument('--model_dir', help='checkpoints, logs and export, local or gs:// (default: runs/<time>)')
    run.add_argument('--checkpoint_steps', type=_positive,
                     help='also checkpoint every N steps (default: only at the end of every epoch)')
    device = parser.add_argument_group('accelerator')
    device.add_argument('--tpu', help="Cloud TPU name, grpc://host:port, or 'local' on a TPU VM (default: TPU_NAME, "
                                      'else the TPU of this VM, else GPUs, else the CPU)')
    device.add_argument('--mixed_precision', choices=PRECISIONS,
                        help='Keras dtype policy (default: mixed_bfloat16 on TPU, float32 otherwise)')
    device.add_argument('--steps_per_execution', type=_positive,
                        help=f'steps per host call (default: {TPU_STEPS_PER_EXECUTION} on TPU, 1 otherwise)')
    device.add_argument('--jit_compile', action='store_true', help='compile the step with XLA on CPU/GPU')
    device.add_argument('--profile_input', action='store_true',
                        help='only iterate the training input pipeline and print its speed')
    device.add_argument('--profile_steps', type=_positive,
                        help='global batches to profile (default and most: one epoch)')
    output = parser.add_argument_group('output')
    output.add_argument('--progress_seconds', type=_positive_finite, default=10,
                        help='at most this often, a progress line between the epoch lines')
    output.add_argument('--quiet', action='store_true', help='print only the epoch lines (and errors)')
    output.add_argument('--verbose', action='store_true',
                        help="show TensorFlow's own log lines, and a traceback for an unexpected error")
    return parser


def main(argv=None):
    console = logging.StreamHandler(sys.stdout)  # our progress on stdout
    log.addHandler(console)
    log.propagate = False
    try:
        args = _parser().parse_args(argv)
        log.setLevel(logging.WARNING if args.quiet else logging.INFO)
        return _main(args)
    except UserError as error:
        print(f'train-model: error: {error}', file=sys.stderr)
        return error.exit_status
    finally:
        log.removeHandler(console)


def _main(args):
    """Runs ``args`` with TensorFlow's log lines diverted; every failure becomes one line on stderr."""
    with native_logs.diverted(not args.verbose, prefix='train-model-') as diversion:
        try:
            model_dir = args.model_dir or os.path.join('runs', datetime.datetime.now(
                datetime.timezone.utc).strftime(layout.VERSION_FORMAT))
            source = check_data(args, model_dir)
            from training import trainer  # imports TensorFlow: only once the arguments and the data are good
            trainer.train(args, source, model_dir)
        except UserError as error:
            print(f'train-model: error: {error}', file=diversion.stream)
            return error.exit_status
        except Exception as error:  # noqa: BLE001 - an unexpected failure is one line too; the log keeps the rest
            if diversion.log is None:
                raise
            summary = (str(error).strip().splitlines() or [''])[0]
            path = diversion.keep_traceback()
            print(f'train-model: error: {type(error).__name__}: {summary} (traceback and log lines in {path}; '
                  'or rerun with --verbose)', file=diversion.stream)
            return 1
    return 0


def check_data(args, model_dir):
    """The dataset version to train on, once its splits and shard files are as ``dataset.json`` says."""
    pinned_version = run_state.read_settings(model_dir).get('dataset_version')
    source = dataset_version.open_version(args.data, args.version or pinned_version)
    splits = [args.train_split, args.eval_split]
    for split in splits:
        source.check_split(split)
    source.check_shards(splits)
    return source


if __name__ == '__main__':
    sys.exit(main())
