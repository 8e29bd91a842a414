"""Beam jobs and their command-line options."""
