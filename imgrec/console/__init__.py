"""The command-line convention every command shares (stdlib only, imports nothing of the project above
the contract).

``errors``: the one-line error types and their exit statuses; ``arguments``: the argument parser and
help formatter; ``held_stderr``: holding file descriptor 2 (TensorFlow's, Beam's and the workers' own
lines) and handing it back; ``command``: one run of a command, ending in one line and an exit status,
with a log file for an unexpected failure, and ``run_command``, the console entry points' exit;
``supervisor``: the long commands run in a child process, so a death by a signal (out of memory) still
ends in one line.
"""
