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

# What a --model trains with unless told otherwise, measured on the demo data (docs/training.md).
# ResNet50 from scratch stays near chance in training for 5 epochs at Adam 3e-3 and learns at 1e-3;
# random shifts took it from 44.5% to 53.9% on validation after 6 epochs, and cost the small CNN 3 points.
DEFAULT_LEARNING_RATE = 3e-3
MODEL_LEARNING_RATES = {'resnet50': 1e-3}
MODEL_MAX_SHIFTS = {'mobilenet_v2': 0.125, 'resnet50': 0.125}  # fraction of a side; the rest only flip


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
    learning_rate: float | None = None  # None: the model's (MODEL_LEARNING_RATES, else DEFAULT_LEARNING_RATE)
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

    @property
    def initial_learning_rate(self) -> float:
        """--learning_rate when given, else the default of --model."""
        if self.learning_rate is not None:
            return self.learning_rate
        return MODEL_LEARNING_RATES.get(self.model, DEFAULT_LEARNING_RATE)

    @property
    def max_shift(self) -> float:
        """The largest random shift of a training image, as a fraction of its side (0 without --augment)."""
        return MODEL_MAX_SHIFTS.get(self.model, 0.0) if self.augment else 0.0

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, now: datetime.datetime | None = None) -> 'TrainConfig':
        """The config of parsed ``train-model`` arguments; ``now`` names the default model_dir."""
        return cls(**dict(vars(args), model_dir=args.model_dir or default_model_dir(now)))


def default_model_dir(now: datetime.datetime | None = None) -> str:
    """runs/<UTC time>, for a run given no --model_dir."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return os.path.join('runs', now.strftime(layout.VERSION_FORMAT))
