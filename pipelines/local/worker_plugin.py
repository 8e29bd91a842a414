"""Imported by Beam's worker harness first thing in each local worker process (``--beam_plugins``).

For a local run with worker processes against a GCS emulator, ``internals.local_run`` names it in what
its FnApiRunner hands the workers (the runner passes on none of the job's own options, ``--beam_plugins``
included): each worker's Beam GCS clients then connect anonymously at once (feature emulator-credentials),
checked as in the launching process. Importing it anywhere else is a mistake: it is the one module here
that acts when imported.
"""
import contextlib

from imgrec.pipelines.local import emulator, internals
from imgrec.pipelines.local.checks import Unusable

if internals.enabled(internals.EMULATOR_CREDENTIALS):
    with contextlib.suppress(Unusable):  # the launching process said so already, in one line
        emulator.check()
        emulator.skip_credential_search()
