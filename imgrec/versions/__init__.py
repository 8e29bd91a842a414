"""Looking at a published version: the build report, the verify command and the TFDS metadata.

Reads a version folder's files only (local or gs://, through the storage layer), so the report and the
TFDS metadata can be written by the build's publish step on a Beam worker, without TensorFlow.
"""
