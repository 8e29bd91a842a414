"""The one import root of image-tfrecords.

Every package is a folder below this one (``imgrec.storage``, ``imgrec.contract``, ...); the design
card's top-level ``pipelines/``, ``transforms/`` and ``training/`` are reached through the committed
directory links beside these folders, so import paths are folder paths for Python, type checkers,
editors and import graphs alike (docs/architecture.md, "One import root").
"""
