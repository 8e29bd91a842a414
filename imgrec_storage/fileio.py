"""The whole-file calls ``imgrec_storage.publication`` and ``transforms.publish`` still make by name, until
they move onto ``storage.Storage``: each one a call of the path's storage under ``policy``."""
from imgrec_storage import storage


def read_bytes(path, policy=None):
    return storage.storage_for(path, policy).read(path)


def write_bytes(path, data, policy=None):
    storage.storage_for(path, policy).write(path, data)


def write_all(files, policy=None):
    if files:
        storage.storage_for(min(files), policy).write_all(files)


def copy(source, target, policy=None):
    storage.storage_for(source, policy).copy(source, target)


def delete(path, policy=None):
    storage.storage_for(path, policy).delete(path)


def retried(doing, what, attempt, policy):
    return storage.retried(doing, what, attempt, policy or storage.retries.default_policy())
