"""The import root of the packages whose names are common words: ``imgrec.pipelines``,
``imgrec.transforms``, ``imgrec.training``, ``imgrec.contract`` and ``imgrec.samples``.

Installed, setup.py places them inside this package, so a user's own ``import training`` never reaches
ours. In a checkout they stay at the top of the tree, and this package's path reaches them there, so the
checkout runs without installing (docs/architecture.md, "Installed names").
"""
import os

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, 'setup.py')) and os.path.isdir(os.path.join(_CHECKOUT, 'pipelines')):
    __path__.append(_CHECKOUT)  # noqa: F821  (the package's own search path)
