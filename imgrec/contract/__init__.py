"""The on-disk contract shared by the build job and the training package.

Feature keys, file names and ``dataset.json`` fields are defined here and nowhere else. Nothing in this
package imports Apache Beam or TensorFlow, so Beam workers and the trainer can both depend on it.
"""
