"""The argument parser and help formatter of every command: one convention for all of them.

- No abbreviations: ``--epoch`` is not taken as ``--epochs``.
- An unknown or misspelt option is one line naming the closest option there is (exit status 2).
- A boolean option is a switch, ``--NAME`` or ``--no_NAME``; the older spellings ``--NAME true|false``
  (or ``on|off``), ``--NAME=true|false`` (what a Flex Template passes) and ``--no-NAME`` still work.
- A dataset is the positional ``DATASET``; the older ``--data DATASET`` still works.
"""
import argparse
import difflib
import sys

from imgrec.console.errors import UserError

_VALUES = {'true': True, 'false': False, 'on': True, 'off': False}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default, unless it has none or its help already says it; a switch's as on or off."""

    def _get_help_string(self, action):
        text = action.help or ''
        if not action.option_strings or action.default in (None, argparse.SUPPRESS) or 'default' in text:
            return text
        if isinstance(action.default, bool):
            return text + (' (default: on)' if action.default else ' (default: off)')
        return text + ' (default: %(default)s)'


class Switch(argparse.Action):
    """``--NAME`` sets True, ``--no_NAME`` False; takes no value (``Parser`` rewrites the older value spellings)."""

    def __init__(self, option_strings, dest, default=False, help=None):  # pylint: disable=redefined-builtin
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)
        self.negative = option_strings[-1]

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string != self.negative)


class _Group:
    """An argument group that records what it adds on its parser (argparse's groups do not say, publicly)."""

    def __init__(self, parser, group):
        self._parser, self._group = parser, group

    def add_argument(self, *args, **kwargs):
        return self._parser.record(self._group.add_argument(*args, **kwargs))

    def add_switch(self, name, help, default=False):  # pylint: disable=redefined-builtin
        return self.add_argument(name, '--no_' + name[2:], action=Switch, default=default, help=help)


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise UserError (one line, exit status 2) instead of exiting.

    ``passes_on``: options it does not know are left for the caller (``parse_known_args``, Beam's options)
    rather than refused.
    """

    def __init__(self, *args, formatter_class=HelpFormatter, passes_on=False, **kwargs):
        self.actions = []  # every argument added, in order (help's included: __init__ adds it)
        self.passes_on = passes_on
        self.dataset_dest = None
        super().__init__(*args, formatter_class=formatter_class, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise UserError(message)

    def record(self, action):
        """Keeps ``action`` in ``actions``; returns it."""
        self.actions.append(action)
        return action

    def add_argument(self, *args, **kwargs):
        return self.record(super().add_argument(*args, **kwargs))

    def add_group(self, title):
        """``add_argument_group``, recording what the group adds in ``actions``."""
        return _Group(self, self.add_argument_group(title))

    def add_exclusive_group(self, required=False):
        """``add_mutually_exclusive_group``, recording what the group adds in ``actions``."""
        return _Group(self, self.add_mutually_exclusive_group(required=required))

    def add_switch(self, name, help, default=False):  # pylint: disable=redefined-builtin
        """``--NAME`` / ``--no_NAME``, default ``default`` (``name`` is '--NAME')."""
        return self.add_argument(name, '--no_' + name[2:], action=Switch, default=default, help=help)

    _DATASET_HELP = 'dataset folder or gs:// prefix (its LATEST version), or one version folder in it'

    def add_dataset(self, dest='dataset', help=_DATASET_HELP):  # pylint: disable=redefined-builtin
        """The positional DATASET every command that reads a dataset takes, and its older spelling --data."""
        self.dataset_dest = dest
        self.add_argument(dest, nargs='?', metavar='DATASET', help=help + ' (or --data DATASET, the older spelling)')
        self.add_argument('--data', dest=dest + '_option', metavar='DATASET', help=argparse.SUPPRESS)

    def option_strings(self):
        """Every option string this parser knows, '--no_NAME' of the switches included."""
        return [option for action in self.actions for option in action.option_strings]

    def close_option(self, name, others=()):
        """The known option closest to ``name``, or None."""
        close = difflib.get_close_matches(name, [o for o in self.option_strings() if o != '-h'] + list(others), n=1)
        return close[0] if close else None

    def unknown_option(self, name, others=()):
        """A UserError for the option ``name``, naming the closest one this parser (or ``others``) knows."""
        close = self.close_option(name, others)
        return UserError(f'unknown option {name}' + (f' (did you mean {close}?)' if close else ''))

    def _spelled(self, args):
        """``args`` with the older spellings of the switches rewritten as ``--NAME`` or ``--no_NAME``."""
        switches = {}
        for action in self.actions:
            if isinstance(action, Switch):
                positive, negative = action.option_strings
                switches.update({positive: (positive, negative), negative: (negative, positive),
                                 '--no-' + positive[2:]: (negative, positive)})
        result, index = [], 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == '--':
                result.extend(args[index - 1:])
                break
            name, equals, value = arg.partition('=')
            if name not in switches:
                result.append(arg)
                continue
            if not equals and index < len(args) and (args[index].lower() in _VALUES or self._takes_no_positional()
                                                     and args[index][:1] not in self.prefix_chars):
                value, index = args[index], index + 1  # --full true; without positionals, --full maybe too
            elif not equals:
                result.append(switches[name][0])
                continue
            if value.lower() not in _VALUES:
                raise UserError(f'argument {switches[name][0]}: expected true or false, got {value!r}')
            result.append(switches[name][0] if _VALUES[value.lower()] else switches[name][1])
        return result

    def _takes_no_positional(self):
        return all(action.option_strings for action in self.actions)

    def _foreign(self, args):
        """The option names in ``args`` this parser does not know."""
        known, found = set(self.option_strings()), []
        for arg in args:
            if arg == '--':
                break
            name = arg.split('=', 1)[0]
            if arg[:1] in self.prefix_chars and len(arg) > 1 and name not in known and not is_number(arg):
                found.append(name)
        return found

    def parse_known_args(self, args=None, namespace=None):
        args = self._spelled(sys.argv[1:] if args is None else list(args))
        try:
            return super().parse_known_args(args, namespace)
        except UserError:
            # A misspelt option explains argparse's complaint ("--input is required") better than it does.
            for name in self._foreign(args):
                if not self.passes_on or self.close_option(name):
                    raise self.unknown_option(name) from None
            raise

    def parse_args(self, args=None, namespace=None):
        """The parsed arguments; an unknown option or a stray argument is a UserError."""
        parsed, extras = self.parse_known_args(args, namespace)
        for arg in extras:
            if arg[:1] in self.prefix_chars and not is_number(arg):
                raise self.unknown_option(arg.split('=', 1)[0])
        if extras:
            raise UserError(f'unexpected argument {extras[0]!r}')
        if self.dataset_dest:
            self._one_dataset(parsed)
        return parsed

    def _one_dataset(self, parsed):
        dest = self.dataset_dest
        positional, option = getattr(parsed, dest), getattr(parsed, dest + '_option')
        delattr(parsed, dest + '_option')
        if positional is not None and option is not None and positional != option:
            raise UserError(f'two datasets given: {positional} and --data {option}; give one')
        if positional is None and option is None:
            raise UserError(f'the dataset is required: {self.prog} DATASET ...')
        setattr(parsed, dest, positional if positional is not None else option)


def is_number(arg):
    """Whether ``arg`` reads as a number (a negative value, not an option)."""
    try:
        float(arg)
    except ValueError:
        return False
    return True
