"""Progress within an epoch: a line at most every ``interval`` seconds, between the epoch lines.

It rewrites one line in place on a terminal and prints plain lines into a log, as Keras's ``fit`` does,
so a slow epoch can be told from a hung one.
"""
import sys
import time

_CLEAR_LINE = '\r\033[K'


class Progress:
    """``update`` after each host call; ``finish`` before the epoch line. ``interval`` None: silent."""

    def __init__(self, interval, stream=None, clock=time.monotonic):
        self._interval = interval
        self._stream = stream or sys.stdout
        self._in_place = self._stream.isatty()
        self._clock = clock
        self._shown = False

    def start_epoch(self, epoch, epochs, steps):
        self._epoch, self._epochs, self._steps = epoch, epochs, steps
        self._start = self._last = self._clock()

    def due(self):
        """Whether a line is due; lets the caller skip fetching the numbers for it otherwise."""
        return self._interval is not None and self._clock() - self._last >= self._interval

    def update(self, step, images, running_loss):
        """Prints the line for ``step`` of the epoch, ``images`` trained since its start, if one is due."""
        if not self.due():
            return
        now = self._clock()
        self._last = now
        rate = images / max(now - self._start, 1e-9)
        line = (f'  step {step}/{self._steps} of epoch {self._epoch + 1}/{self._epochs}: {rate:.0f} images/s, '
                f'running loss {running_loss:.4f}')
        self._stream.write(f'{_CLEAR_LINE}{line}' if self._in_place else f'{line}\n')
        self._stream.flush()
        self._shown = True

    def finish(self):
        """Clears an in-place line so the epoch line replaces it."""
        if self._in_place and self._shown:
            self._stream.write(_CLEAR_LINE)
            self._stream.flush()
        self._shown = False
