"""Picks the ``tf.distribute`` strategy: a TPU when one is named or attached, else GPUs, else the CPU.

Order (as the seed codelab, made explicit): ``--tpu`` (a Cloud TPU name, ``grpc://host:port``, or
``local`` on a TPU VM) -> ``TPU_NAME`` -> this VM's own TPU chips -> every GPU (``MirroredStrategy``)
-> the CPU's logical devices (``MirroredStrategy``; one replica unless the CPU was split). A TPU that
was asked for but cannot be reached is an error, never a silent fall-back to the CPU. The TPU client
and runtime can block for minutes on a dead address, so reachability is probed first with short
socket timeouts.
"""
import dataclasses
import glob
import logging
import os
import socket
import urllib.parse

import tensorflow as tf

from imgrec.console.errors import UserError
from imgrec.storage import storage

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5
TPU_VM_DEVICE_GLOBS = ('/dev/accel[0-9]*', '/dev/vfio/[0-9]*')


@dataclasses.dataclass(frozen=True)
class TpuTarget:
    address: str  # 'local', 'grpc://host:port' or a Cloud TPU name
    source: str  # where the address came from, for messages

    @property
    def is_tpu_vm(self):
        """A TPU VM reads this machine's files; a TPU node's own hosts cannot."""
        return self.address == 'local'


@dataclasses.dataclass(frozen=True)
class Accelerator:
    strategy: tf.distribute.Strategy
    kind: str  # 'tpu', 'gpu' or 'cpu'
    num_input_pipelines: int  # one per host that feeds replicas

    @property
    def num_replicas(self):
        return self.strategy.num_replicas_in_sync


def find_tpu(flag=None, environ=None, device_globs=TPU_VM_DEVICE_GLOBS):
    """The TPU to use, or None. Looks at no network: only the flag, the environment and /dev."""
    environ = os.environ if environ is None else environ
    if flag:
        return TpuTarget(flag, '--tpu')
    if environ.get('TPU_NAME'):
        return TpuTarget(environ['TPU_NAME'], 'TPU_NAME')
    if any(glob.glob(pattern) for pattern in device_globs):
        return TpuTarget('local', 'TPU chips on this VM')
    return None


def check_storage(target, **paths):
    """Refuses local paths for a TPU node, whose hosts read the data and write checkpoints themselves."""
    if target is None or target.is_tpu_vm:
        return
    local = [f'--{name} {path}' for name, path in paths.items()
             if path and not storage.storage_for(path).reachable_by_cloud_workers]
    if local:
        raise UserError(f"TPU {target.address!r} (from {target.source}) is a TPU node, whose hosts cannot read "
                        f"this machine's disk: {', '.join(local)} must be on gs://")


def create(target):
    """Returns the ``Accelerator`` for ``target`` (from ``find_tpu``), logging the choice."""
    if target is not None:
        strategy = tf.distribute.TPUStrategy(_connect_tpu(target))
        accelerator = Accelerator(strategy, 'tpu', strategy.extended.num_hosts)
        where = f'TPU {target.address!r} (from {target.source})'
    else:
        gpus = tf.config.list_logical_devices('GPU')
        devices = gpus or tf.config.list_logical_devices('CPU')
        strategy = tf.distribute.MirroredStrategy([device.name for device in devices])
        accelerator = Accelerator(strategy, 'gpu' if gpus else 'cpu', 1)
        where = f"{len(devices)} {'GPU' if gpus else 'CPU'} device(s)"
    log.info('strategy: %s on %s, %d replica(s)', type(strategy).__name__, where, accelerator.num_replicas)
    return accelerator


def _connect_tpu(target):
    if target.address != 'local':
        if target.address.startswith('grpc://'):
            _probe(target, target.address)
        else:
            _probe_metadata_server(target)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target.address)
        if target.address != 'local':
            _probe(target, resolver.master())
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f'cannot use TPU {target.address!r} (from {target.source}): {first_line}') from None
    return resolver


def _probe(target, address):
    parsed = urllib.parse.urlparse(address if '://' in address else f'grpc://{address}')
    try:
        socket.create_connection((parsed.hostname, parsed.port or 8470), timeout=PROBE_TIMEOUT_S).close()
    except OSError as error:
        raise UserError(f'TPU {target.address!r} (from {target.source}) is unreachable: '
                        f'{parsed.hostname}:{parsed.port or 8470}: {error}') from None


def _probe_metadata_server(target):
    """A TPU name is looked up through the Compute Engine metadata server, which exists only on Google Cloud."""
    host = os.environ.get('GCE_METADATA_HOST') or os.environ.get('GCE_METADATA_IP') or 'metadata.google.internal'
    name, _, port = host.partition(':')
    try:
        socket.create_connection((name, int(port or 80)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as error:
        raise UserError(f'cannot look up TPU {target.address!r} (from {target.source}): the metadata server {host} '
                        f'is unreachable ({error}); outside Google Cloud pass --tpu grpc://IP:8470') from None
