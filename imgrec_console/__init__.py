"""The command-line convention: one-line errors, exit codes, held stderr, the shared parser."""
