"""Stable hashes of source names: the same name gives the same number on every run and machine."""
import hashlib


def stable_hash(salt, text):
    """Unsigned 64-bit hash of ``text`` under ``salt`` (independent salts give independent orders)."""
    digest = hashlib.sha256(f'{salt}\0{text}'.encode('utf-8')).digest()
    return int.from_bytes(digest[:8], 'big')
