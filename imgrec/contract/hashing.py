"""Stable hashes of source names: the same name gives the same number on every run and machine.

Part of the contract: a source's split, its place inside a shard and its record-index part all follow
from these hashes, under independent salts.
"""
import hashlib

_ORDER_SALT = 'order'


def _digest(salt, text):
    return hashlib.sha256(f'{salt}\0{text}'.encode('utf-8')).digest()


def stable_hash(salt, text):
    """Unsigned 64-bit hash of ``text`` under ``salt``: sha256 of ``salt + '\\0' + text``, first 8 bytes big-endian."""
    return int.from_bytes(_digest(salt, text)[:8], 'big')


def stable_hash_pair(salt, text):
    """Two unsigned 64-bit hashes of ``text`` under ``salt`` (``stable_hash``'s and the next 8 bytes): 128 bits, for
    a name whose collision would mix two images up rather than cost a little work."""
    digest = _digest(salt, text)
    return int.from_bytes(digest[:8], 'big'), int.from_bytes(digest[8:16], 'big')


def order_key(source):
    """(salted hash, source): records sort by it inside a shard, a deterministic shuffle."""
    return stable_hash(_ORDER_SALT, source), source
