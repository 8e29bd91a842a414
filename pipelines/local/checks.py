"""What the checks of Beam's internals share: the one exception, and looks at code that need no source.

A check reads the names a Beam function looks up (``code_names``) and its parameters
(``parameters``): enough to tell that an attribute still exists and is still used as assumed, without
running Beam or reading its source files (which an installation may not carry).
"""
import inspect
import types

import apache_beam


class Unusable(Exception):
    """A Beam internal is missing or no longer behaves as a feature assumes; the message says which."""


def require(condition, reason):
    """Raises Unusable(reason) unless ``condition``."""
    if not condition:
        raise Unusable(reason)


def attribute(owner, path):
    """``owner.a.b`` for path 'a.b'; Unusable naming the first missing part."""
    found = owner
    for part in path.split('.'):
        if not hasattr(found, part):
            raise Unusable(f'Beam {apache_beam.__version__} has no {path}')
        found = getattr(found, part)
    return found


def function(owner, path):
    """``attribute``, which must be a plain function (a method, classmethod or staticmethod unwrapped)."""
    found = attribute(owner, path)
    found = getattr(found, '__func__', found)
    require(isinstance(found, types.FunctionType),
            f'Beam {apache_beam.__version__}: {path} is no longer a Python function')
    return found


def code_names(fn):
    """Every global and attribute name ``fn`` looks up, nested functions and comprehensions included."""
    names = set()
    pending = [fn.__code__]
    while pending:
        code = pending.pop()
        names.update(code.co_names)
        pending.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
    return names


def code_constants(fn):
    """Every constant in ``fn``'s code, nested code included."""
    found = []
    pending = [fn.__code__]
    while pending:
        code = pending.pop()
        for const in code.co_consts:
            (pending if isinstance(const, types.CodeType) else found).append(const)
    return found


def uses(fn, path, *names):
    """Unusable unless ``fn`` (called ``path`` in the message) looks up every one of ``names``."""
    missing = [name for name in names if name not in code_names(fn)]
    require(not missing, f"Beam {apache_beam.__version__}: {path} no longer uses {', '.join(missing)}")


def parameters(fn, path, expected):
    """Unusable unless ``fn``'s parameter names are exactly ``expected`` (a tuple, self included)."""
    found = tuple(inspect.signature(fn).parameters)
    require(found == tuple(expected),
            f"Beam {apache_beam.__version__}: {path} takes ({', '.join(found)}), not ({', '.join(expected)})")


def arity(fn, path, count):
    """Unusable unless ``fn`` takes exactly ``count`` parameters."""
    found = len(inspect.signature(fn).parameters)
    require(found == count, f'Beam {apache_beam.__version__}: {path} takes {found} arguments, not {count}')
