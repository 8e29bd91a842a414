"""Starts a command with process limits or signal states set, without forking the test process.

``subprocess``'s ``preexec_fn`` makes it fork the pytest process itself (not vfork), where gRPC's threads run
once a Beam test has: gRPC's fork handlers can then abort the child before it execs (status -6, "epoll_wait
error: Bad file descriptor"). So a fresh Python process sets the limits and states, then execs the command:
limits, ignored signals and the blocked-signal mask all survive exec.
"""
import json
import os
import resource
import signal
import sys


def command(argv, *, core_bytes=None, address_space_bytes=None, ignore=(), block=()):
    """``argv`` behind the launcher: run with ``ulimit -c``/``-v`` as given, ``ignore``d and ``block``ed signals."""
    settings = {'core': core_bytes, 'address_space': address_space_bytes,
                'ignore': [int(number) for number in ignore], 'block': [int(number) for number in block]}
    return [sys.executable, os.path.abspath(__file__), json.dumps(settings), *argv]


def _launch(settings, argv):
    for name, value in (('RLIMIT_CORE', settings['core']), ('RLIMIT_AS', settings['address_space'])):
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value))
    for number in settings['ignore']:
        signal.signal(number, signal.SIG_IGN)
    if settings['block']:
        signal.pthread_sigmask(signal.SIG_BLOCK, settings['block'])
    os.execv(argv[0], argv)


if __name__ == '__main__':
    _launch(json.loads(sys.argv[1]), sys.argv[2:])
