"""The argument parser and help formatter of every command."""
import argparse

from imgrec_console.errors import UserError


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default, unless it has none or its help already says it; False shows as off."""

    def _get_help_string(self, action):
        text = action.help or ''
        if not action.option_strings or action.default in (None, argparse.SUPPRESS) or 'default' in text:
            return text
        return text + (' (default: off)' if action.default is False else ' (default: %(default)s)')


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise UserError (one line, exit status 2) instead of exiting."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message):
        raise UserError(message)
