"""The check that a portable runner's ``--job_endpoint`` answers, before anything is built or staged.

Beam's PortableRunner (and Flink's, Spark's) submits the job through the Job API at ``--job_endpoint``.
Beam waits there up to ``--job_server_timeout`` (300 s) for a channel and then fails as
``FutureTimeoutError``, which names nothing; this check fails at the first refused connection instead,
in one line naming the endpoint. ``embed`` runs Beam's job service in this process: nothing to reach.
"""
import threading

import grpc
from apache_beam.options.pipeline_options import PortableOptions

from imgrec.console.errors import UserError

EMBEDDED = 'embed'


def check(options) -> None:
    """Raises UserError unless the options name no job endpoint, the embedded one, or one that accepts a
    connection within ``--job_server_timeout`` seconds."""
    portable = options.view_as(PortableOptions)
    endpoint = portable.job_endpoint
    if not endpoint or endpoint == EMBEDDED:
        return
    problem = _connection_problem(endpoint, portable.job_server_timeout)
    if problem:
        raise UserError(f'--job_endpoint {endpoint}: {problem}; start the job server there, or give '
                        f'--job_endpoint {EMBEDDED} to run the job service in this process')


def _connection_problem(endpoint: str, timeout: float) -> str | None:
    """Why no channel to ``endpoint`` became ready (a refused connection ends the wait), or None."""
    settled = threading.Event()
    reached: list = []

    def seen(state):
        if state in (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                     grpc.ChannelConnectivity.SHUTDOWN):
            reached.append(state)
            settled.set()

    with grpc.insecure_channel(endpoint) as channel:
        channel.subscribe(seen, try_to_connect=True)
        try:
            if not settled.wait(timeout):
                return f'no job service answered within {timeout} s (--job_server_timeout)'
        finally:
            channel.unsubscribe(seen)
    if reached[0] is grpc.ChannelConnectivity.READY:
        return None
    return 'no job service answers there (the connection failed)'
