"""The options of a training run as one frozen value, built once from the command line (as Model
Garden's experiment configs are), so the trainer reads typed fields instead of an argparse Namespace.

Fields are named as the options are (``--shuffle_buffer`` is ``shuffle_buffer``) and default as they do.
No TensorFlow here: ``train-model`` builds it before TensorFlow is imported.
"""
import argparse
import dataclasses
import datetime
import os

from imgrec.contract import layout


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What ``train-model`` was asked to do. None where the default depends on the accelerator or data."""
    data: str  # the dataset's output folder or gs:// prefix
    model_dir: str  # resolved: --model_dir, else runs/<UTC time>
    # data
    version: str | None = None  # None: the version a resumed model_dir pinned, else LATEST's
    train_split: str = 'train'
    eval_split: str = 'validation'
    cache: bool = False
    augment: bool = True
    seed: int = 0
    shuffle_buffer: int = 1024
    cycle_length: int | None = None
    block_length: int = 1
    deterministic: bool = True
    allow_single_class: bool = False  # train on a split of one class (refused otherwise)
    # training
    model: str = 'small_cnn'
    epochs: int = 10
    batch_size: int | None = None  # global; None: a per-replica default times the replicas
    learning_rate: float = 3e-3
    checkpoint_steps: int | None = None
    # accelerator
    tpu: str | None = None
    mixed_precision: str | None = None
    steps_per_execution: int | None = None
    jit_compile: bool = False
    profile_input: bool = False
    profile_steps: int | None = None
    # output
    progress_seconds: float = 10
    quiet: bool = False
    verbose: bool = False

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, now: datetime.datetime | None = None) -> 'TrainConfig':
        """The config of parsed ``train-model`` arguments; ``now`` names the default model_dir."""
        return cls(**dict(vars(args), model_dir=args.model_dir or default_model_dir(now)))


def default_model_dir(now: datetime.datetime | None = None) -> str:
    """runs/<UTC time>, for a run given no --model_dir."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return os.path.join('runs', now.strftime(layout.VERSION_FORMAT))
