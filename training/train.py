"""Trains a classifier on a published dataset, on whatever accelerator this machine has.

    train-model DATASET --epochs N --batch_size B [--model_dir DIR] [options]

Reads ``DATASET/LATEST`` (or ``--version``), trains on ``--train_split`` through
``strategy.distribute_datasets_from_function``, evaluates on ``--eval_split`` after every epoch and
prints one line per epoch, with progress lines between them. Checkpoints go to ``--model_dir`` every
epoch (and every ``--checkpoint_steps``); running again with the same ``--model_dir`` resumes where the
last checkpoint left off, at the same position in the data. The model is exported as a SavedModel at
the end.

This module is the command line: it parses the arguments and checks the dataset (its shard files exist
with the sizes ``dataset.json`` gives) before TensorFlow is imported, so ``--help`` and mistakes are
answered at once, in one line; ``imgrec.training.trainer`` does the rest.
"""
import argparse
import contextlib
import datetime
import logging
import math
import sys
import typing

from imgrec.console.arguments import Parser
from imgrec.console.command import Command, run_command
from imgrec.console.supervisor import supervise
from imgrec.console.errors import UserError
from imgrec.storage import leases, storage
from imgrec.training import dataset_version, quiet, run_state
from imgrec.training.batching import DEFAULT_PER_REPLICA_BATCH, TPU_PER_REPLICA_BATCH, TPU_STEPS_PER_EXECUTION
from imgrec.training.config import DEFAULT_LEARNING_RATE, MODEL_LEARNING_RATES, MODEL_MAX_SHIFTS, TrainConfig

log = logging.getLogger('imgrec.training')

PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')
BUILT_IN_MODELS = 'small_cnn, mobilenet_v2 or resnet50'  # training.model.MODELS, named without importing Keras


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
    parser = Parser(prog='train-model', description=description)
    parser.add_dataset(dest='data')
    data = parser.add_group('data')
    data.add_argument('--version', help='dataset version to read (default: the one a resumed --model_dir was '
                                        'trained on, else the one LATEST names)')
    data.add_argument('--train_split', default='train', help='split to train on')
    data.add_argument('--eval_split', default='validation', help='split evaluated after every epoch')
    data.add_switch('--cache', help='keep decoded images in memory after the first epoch')
    data.add_switch('--augment', default=True, help='random horizontal flips of training images, and for '
                                                     f"{' and '.join(sorted(MODEL_MAX_SHIFTS))} random shifts")
    data.add_argument('--seed', type=int, default=0, help='seeds file order, shuffling, augmentation and weights')
    data.add_argument('--shuffle_buffer', type=_positive, default=1024, help='records in the shuffle buffer')
    data.add_argument('--cycle_length', type=_positive, help='shards read at once (default: all, up to 16)')
    data.add_argument('--block_length', type=_positive, default=1, help='records taken from a shard in turn')
    data.add_switch('--deterministic', default=True, help='fixed record order (needed for an exact mid-epoch resume)')
    data.add_switch('--allow_single_class', help='train even when the training split holds only one class '
                                                 '(refused by default: every prediction would be right)')
    run = parser.add_group('training')
    run.add_argument('--model', default='small_cnn', help=f'network: {BUILT_IN_MODELS}')
    run.add_argument('--epochs', type=_positive, default=10, help='passes over the training split')
    run.add_argument('--batch_size', type=_positive,
                     help=f'global batch size (default: {TPU_PER_REPLICA_BATCH} per replica on TPU, '
                          f'{DEFAULT_PER_REPLICA_BATCH} per replica otherwise)')
    model_rates = ', '.join(f'{rate:g} for {name}' for name, rate in sorted(MODEL_LEARNING_RATES.items()))
    run.add_argument('--learning_rate', type=_positive_finite,
                     help='initial Adam learning rate, decayed to 0 over the run (cosine) '
                          f'(default: {model_rates}, {DEFAULT_LEARNING_RATE:g} otherwise)')
    run.add_argument('--model_dir', help='checkpoints, logs and export, local or gs:// (default: runs/<time>)')
    run.add_argument('--checkpoint_steps', type=_positive,
                     help='also checkpoint every N steps (default: only at the end of every epoch)')
    device = parser.add_group('accelerator')
    device.add_argument('--tpu', help="Cloud TPU name, grpc://host:port, or 'local' on a TPU VM (default: TPU_NAME, "
                                      'else the TPU of this VM, else GPUs, else the CPU)')
    device.add_argument('--mixed_precision', choices=PRECISIONS,
                        help='Keras dtype policy (default: mixed_bfloat16 on TPU, float32 otherwise)')
    device.add_argument('--steps_per_execution', type=_positive,
                        help=f'steps per host call (default: {TPU_STEPS_PER_EXECUTION} on TPU, 1 otherwise)')
    device.add_switch('--jit_compile', help='compile the step with XLA on CPU/GPU')
    device.add_switch('--profile_input', help='only iterate the training input pipeline and print its speed')
    device.add_argument('--profile_steps', type=_positive,
                        help='global batches to profile (default and most: one epoch)')
    output = parser.add_group('output')
    output.add_argument('--progress_seconds', type=_positive_finite, default=10,
                        help='at most this often, a progress line between the epoch lines')
    output.add_switch('--quiet', help='print only the epoch lines (and errors)')
    output.add_switch('--verbose', help="show TensorFlow's own log lines, and a traceback for an unexpected error")
    return parser


def main(argv: typing.Sequence[str] | None = None) -> int:
    """Returns the exit status: 0 trained, 2 a usage mistake, 1 a damaged dataset or a failed run."""
    console = logging.StreamHandler(sys.stdout)  # our progress on stdout
    log.addHandler(console)
    log.propagate = False
    try:
        with Command('train-model') as command:
            config = parse_config(argv)
            log.setLevel(logging.WARNING if config.quiet else logging.INFO)
            if config.verbose:
                quiet.restore()  # TensorFlow's own lines too
            command.begin(verbose=config.verbose)  # TensorFlow's log lines, shown only with --verbose
            source = check_data(config)
            from imgrec.training import trainer  # pylint: disable=import-outside-toplevel  # TensorFlow: once all is good
            with reading(source):
                trainer.train(config, source)
            return 0
        return command.status
    finally:
        log.removeHandler(console)


def cli():
    """The ``train-model`` command: run in a child process, so that even its death by a signal (out of
    memory) ends in one line (``imgrec.console.supervisor``)."""
    supervise('train-model')
    run_command(main)


def parse_config(argv: typing.Sequence[str] | None, now: datetime.datetime | None = None) -> TrainConfig:
    """The TrainConfig of a command line, built once; ``now`` names the default --model_dir."""
    return TrainConfig.from_arguments(_parser().parse_args(argv), now)


def check_data(config):
    """The dataset version to train on, once its splits and shard files are as ``dataset.json`` says."""
    pinned_version = run_state.read_settings(config.model_dir).get('dataset_version')
    afresh = f'or start afresh with a new --model_dir (or delete {config.model_dir})'
    if pinned_version and config.version and config.version != pinned_version:
        raise UserError(f'--model_dir {config.model_dir} holds a run trained on dataset version {pinned_version!r}, '
                        f'not --version {config.version}: resume without --version, {afresh}')
    try:
        source = dataset_version.open_version(config.data, config.version or pinned_version)
    except UserError:
        if not pinned_version or config.version:
            raise
        other = dataset_version.open_version(config.data).version  # no dataset there at all: that is the line
        raise UserError(f'--model_dir {config.model_dir} holds a run trained on dataset version {pinned_version!r}, '
                        f'which {config.data} does not hold (its version is {other!r}): resume with the '
                        f'dataset folder that holds it, {afresh}') from None
    splits = [config.train_split, config.eval_split]
    for split in splits:
        source.check_split(split)
    if not config.allow_single_class:
        check_classes(source, config.train_split)
    source.check_shards(splits)
    return source


def check_classes(source: dataset_version.DatasetVersion, split: str) -> None:
    """Refuses a ``split`` whose records are all of one class: a model trained on it reaches 100% accuracy
    by always answering that class, which reads as success and has learnt nothing."""
    counts = source.metadata['splits'][split].get('class_counts') or dict.fromkeys(source.labels, 1)
    present = [label for label in source.labels if counts.get(label, 0)]
    if len(present) < 2:
        what = f'only class {present[0]!r}' if present else 'no class with records'
        raise UserError(f'split {split!r} of {source.directory} holds {what} (of {len(source.labels)} label(s)): '
                        'a model trained on it is always right and learns nothing; build it with a folder per '
                        'class, or pass --allow_single_class')


@contextlib.contextmanager
def reading(source):
    """Holds a reader's lease on the version ``source`` while the block runs, renewed every
    ``leases.RENEW_EVERY_S``, so a build's --keep_versions does not delete it (docs/publication.md): the
    readers' one API, ``leases.reading``.

    An output this run may not write to gets a warning, and the run goes on without the lease.
    """
    def lost(lease):
        log.warning('train-model: warning: the reader lease %s lapsed: a build with --keep_versions may now '
                    'delete version %s', lease.path, source.version)

    try:
        with leases.reading(source.root, source.version, storage.storage_for(source.root), on_lost=lost,
                            warn=lambda line: log.warning('train-model: warning: %s', line.replace(
                                'while it is read', 'while this run reads it'))):
            yield
    except leases.Pruned:
        raise UserError(f'version {source.version!r} of {source.root} was pruned as this run started; '
                        f'run again') from None


if __name__ == '__main__':
    cli()
