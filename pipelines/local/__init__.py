"""Local runs, and every use of Apache Beam's private internals in the project, in this one folder.

Importing any module here changes nothing in Beam (``worker_plugin`` alone, which Beam's workers
import, acts when imported). ``internals`` lists the features, checks each against the Beam installed,
and applies them only around the local run that needs them: see docs/beam-internals.md.
"""
