"""What a ``--model_dir`` keeps between runs: the settings a resume must not change (checkpoints: ``checkpoints``).

A resumed run recomputes the data order from (seed, epoch, step). That is only right with the dataset
version, global batch size, seed and input pipeline count the checkpoints were made with, so the first
run writes them to ``run.json`` and later runs must match (the version is taken from it by default).
Reading them needs no TensorFlow for a local ``--model_dir``, so the command line checks them first.
"""
import json

from imgrec.contract import layout
from imgrec.console.errors import UserError
from imgrec.storage import storage

RUN_JSON = 'run.json'
CHECKPOINTS = 'checkpoints'


def read_settings(model_dir):
    """The settings pinned in ``model_dir``, or {} for a new run."""
    path = layout.join(model_dir, RUN_JSON)
    files = storage.storage_for(path)
    return json.loads(files.read(path)) if files.exists(path) else {}


def pin_settings(model_dir, settings):
    """Writes ``settings`` for a new ``model_dir``; for an existing one, refuses any that changed."""
    pinned = read_settings(model_dir)
    if not pinned:
        path = layout.join(model_dir, RUN_JSON)
        storage.storage_for(path).write(path, (json.dumps(settings, indent=2, sort_keys=True) + '\n').encode('utf-8'))
        return
    changed = [f'{key} {pinned.get(key)!r} -> {value!r}' for key, value in settings.items() if pinned.get(key) != value]
    if changed:
        raise UserError(f"{model_dir} holds a run with other settings ({'; '.join(changed)}); resuming it needs the "
                        'same ones, or pass a new --model_dir')
