"""glibc's malloc tuned so that the memory a stage frees goes back to the system (``imgrec.pipelines.local.workers``
says why): for the worker processes of a local run (``malloc_env``) and the ``build-dataset`` process
(``tune_malloc``). No Beam import: the command tunes its process before Beam is loaded.
"""
import contextlib
import ctypes
import os

# glibc's environment variable -> (mallopt's parameter number from malloc.h, value)
MALLOC_SETTINGS = {'MALLOC_ARENA_MAX': (-8, 2), 'MALLOC_MMAP_THRESHOLD_': (-3, 1 << 20)}


@contextlib.contextmanager
def malloc_env():
    """MALLOC_SETTINGS in the environment the block's worker processes inherit, but for any the user set."""
    added = [name for name in MALLOC_SETTINGS if name not in os.environ]
    for name in added:
        os.environ[name] = str(MALLOC_SETTINGS[name][1])
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def tune_malloc():
    """MALLOC_SETTINGS for this process, but for any the user set. For a process that only builds: a
    library's caller may not want its allocator changed."""
    for name, (parameter, value) in MALLOC_SETTINGS.items():
        if name not in os.environ:
            with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
                ctypes.CDLL(None).mallopt(parameter, value)
