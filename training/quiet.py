"""Keeps TensorFlow's and absl's log lines off the user's stderr: importing ``training`` quiets them.

TensorFlow's C++ lines (``I0000 ... cpu_feature_guard.cc``, oneDNN's notice, tf.data's buffer notes) obey
``TF_CPP_MIN_LOG_LEVEL`` only when it is set before TensorFlow logs its first line, at import; its Python
warnings and absl's go to the ``tensorflow`` and ``absl`` loggers. So the package sets the variable to 2
(errors only) and the two loggers to ERROR, each only where the user has not chosen (a variable already
set, a level already given wins). Imported after TensorFlow, it cannot quiet the C++ lines any more.
``train-model --verbose`` undoes it (``restore``), to show everything.
"""
import logging
import os

TF_LOG_LEVEL = 'TF_CPP_MIN_LOG_LEVEL'
_LOGGERS = ('tensorflow', 'absl')
_set = []  # what quiet() changed, for restore()


def quiet():
    if TF_LOG_LEVEL not in os.environ:
        os.environ[TF_LOG_LEVEL] = '2'
        _set.append(TF_LOG_LEVEL)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.ERROR)
            _set.append(name)


def restore():
    """Undoes what ``quiet`` changed."""
    while _set:
        name = _set.pop()
        if name == TF_LOG_LEVEL:
            os.environ.pop(TF_LOG_LEVEL, None)
        else:
            logging.getLogger(name).setLevel(logging.NOTSET)
