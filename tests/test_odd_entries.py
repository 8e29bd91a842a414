"""Odd directory entries and odd class names never hang, stall or fail a build.

A FIFO named x.jpg, a symlink to itself and a symlink to /dev/zero are quarantined with their reasons, never
read and never retried; reads are bounded by the file's size. A class named ``cash$$``, ``$x^2$`` or ``a_b``
publishes, and the report's charts show the names as written (text, not mathtext).
"""
import base64
import errno
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from imgrec.contract import layout
from imgrec.contract.reasons import NOT_A_FILE, READ_ERROR
from imgrec.storage import local_storage, retries
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import check_version, load_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIVE_UP_S = 600  # a safety net against a hang, not a timing threshold


def _build(images, output, *extra):
    return subprocess.run(
        [sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', str(images), '--output', str(output),
         '--image_size', '32', '--direct_running_mode', 'in_memory', *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=GIVE_UP_S)


def test_a_fifo_a_symlink_loop_and_a_device_are_quarantined_never_read(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 6, png_every=0, **SMALL)
    os.mkfifo(images / 'circle' / 'x.jpg')  # opening it for reading would wait for a writer
    os.symlink('loop.jpg', images / 'circle' / 'loop.jpg')  # ELOOP: permanent, never retried
    os.symlink('/dev/zero', images / 'square' / 'zero.png')  # never ends
    result = _build(images, tmp_path / 'out', '--max_error_rate', '0.2')
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'retried' not in result.stdout
    version_dir, document = load_version(str(tmp_path / 'out'))
    with open(os.path.join(version_dir, layout.QUARANTINE_JSONL)) as stream:
        quarantined = {item['source']: item for item in map(json.loads, stream)}
    assert {source: item['reason'] for source, item in quarantined.items()} == {
        'circle/x.jpg': NOT_A_FILE, 'circle/loop.jpg': READ_ERROR, 'square/zero.png': NOT_A_FILE}
    assert 'a FIFO' in quarantined['circle/x.jpg']['message']
    assert 'a character device' in quarantined['square/zero.png']['message']
    assert 'symbolic links' in quarantined['circle/loop.jpg']['message']  # the OSError's own words (ELOOP)
    assert document['quarantine']['by_reason'] == {NOT_A_FILE: 2, READ_ERROR: 1}
    assert document['counts']['written'] == 4 * 6


def test_reads_stop_at_the_size_the_file_had_when_opened(tmp_path):
    path = tmp_path / 'a.jpg'
    path.write_bytes(b'x' * 1000)
    assert local_storage.read_local(str(path)) == b'x' * 1000
    # /proc files say they hold 0 bytes and then give more: read as what their size says.
    assert os.path.getsize('/proc/self/environ') == 0 and open('/proc/self/environ', 'rb').read()
    assert local_storage.read_local('/proc/self/environ') == b''
    os.mkfifo(tmp_path / 'fifo.jpg')
    with pytest.raises(local_storage.NotARegularFile, match='is a FIFO'):  # at once: no writer is waited for
        local_storage.read_local(str(tmp_path / 'fifo.jpg'))
    with pytest.raises(local_storage.NotARegularFile, match='is a folder'):
        local_storage.read_local(str(tmp_path))


@pytest.mark.parametrize('number', [errno.ELOOP, errno.ENAMETOOLONG])
def test_a_symlink_loop_and_a_name_too_long_are_permanent_never_retried(number):
    assert not retries.is_transient(OSError(number, os.strerror(number)))


def _chart_texts(report):
    """Every text drawn in the report's SVG charts."""
    texts = []
    for encoded in re.findall(r'data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)', report):
        root = ElementTree.fromstring(base64.b64decode(encoded))
        texts += [''.join(node.itertext()) for node in root.iter('{http://www.w3.org/2000/svg}text')]
    return texts


def test_class_names_with_dollars_publish_and_the_report_shows_them_as_written(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 4, png_every=0, **SMALL)
    names = {'circle': 'cash$$', 'square': '$x^2$', 'cross': 'a_b', 'triangle': r'$\alpha$'}
    for shape, name in names.items():
        os.rename(images / shape, images / name)
    result = _build(images, tmp_path / 'out', '--version', 'v1')
    assert result.returncode == 0, result.stderr[-3000:]
    document, _ = check_version(str(tmp_path / 'out'))
    assert sorted(document['labels']) == sorted(names.values())
    report = (tmp_path / 'out' / 'v1' / layout.REPORT_HTML).read_text(encoding='utf-8')
    texts = _chart_texts(report)
    for name in names.values():
        assert name in texts, (name, texts)  # the tick label is the name itself, '$' and all
        assert f'<h3>{name}</h3>' in report
