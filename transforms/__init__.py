"""PTransforms and DoFns of the build job, and the plain image functions they call."""
import logging


class _OurKeys(logging.Filter):
    """Drops Beam's warning that it encodes a key by its "fallback deterministic coder" when the key is one of
    our NamedTuples (``elements.Tally``, ``splits.Count``, ``sharding.Sized``): for a NamedTuple that coder is Beam's
    deterministic one (the type by reference, then the fields), as it is for a plain tuple, so the warning
    would only reach the user's terminal. Installed on import of the package: every process that encodes them
    imports it."""

    def filter(self, record):
        if not str(record.msg).startswith('Using fallback deterministic coder') or not record.args:
            return True
        found = record.args[0] if isinstance(record.args, tuple) else None
        return not (isinstance(found, type) and issubclass(found, tuple)
                    and found.__module__.startswith('imgrec.transforms.'))


logging.getLogger('apache_beam.coders.coder_impl').addFilter(_OurKeys())
