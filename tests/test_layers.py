"""The layers import downward only, and docs/architecture.md's picture of them is the code's.

Every ``import`` and ``from ... import`` of ``imgrec.*`` in each layer's modules (function-level ones too) is
read with ``ast``; the layers a layer reaches must be exactly those its line of the picture names, and each
must stand lower in the picture than the layer that imports it.
"""
import ast
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGE = REPO / 'docs' / 'architecture.md'


def _picture():
    """[(layer folder, {folders it imports})], top floor first, from the block after ``<!-- layers -->``."""
    text = PAGE.read_text()
    block = text.split('<!-- layers -->', 1)[1].split('```')[1]
    rows = [re.match(r'^(\S+)\s+->(.*)$', line) for line in block.splitlines() if line.strip()]
    return [(row[1], set(row[2].split())) for row in rows]


def _layer_of(module, layers):
    """The layer folder of a dotted ``imgrec.x.y`` module name, if it is one of ``layers``."""
    parts = module.split('.')
    if parts[0] != 'imgrec' or len(parts) < 2:
        return None
    for folder in (f'imgrec/{parts[1]}/', f'{parts[1]}/'):
        if folder in layers:
            return folder
    return None


def _imports(folder, layers):
    """The layers the modules under ``folder`` import (itself excluded)."""
    found = set()
    for path in (REPO / folder).rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f'{node.module}.{alias.name}' for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found |= {layer for layer in (_layer_of(name, layers) for name in names) if layer and layer != folder}
    return found


def test_every_layer_imports_what_the_picture_says_and_only_downward():
    picture = _picture()
    layers = [folder for folder, _ in picture]
    assert set(layers) >= {'pipelines/', 'transforms/', 'training/', 'imgrec/contract/', 'imgrec/storage/'}
    for floor, (folder, drawn) in enumerate(picture):
        assert (REPO / folder).is_dir(), folder
        assert _imports(folder, layers) == drawn, folder
        assert all(layers.index(imported) > floor for imported in drawn), f'{folder} imports upward'


def test_every_layer_of_the_import_root_is_in_the_picture():
    drawn = {folder for folder, _ in _picture()}
    root = {f'imgrec/{path.name}/' if not path.is_symlink() else f'{path.name}/'
            for path in (REPO / 'imgrec').iterdir() if path.is_dir() and (path / '__init__.py').is_file()}
    assert root == drawn
