"""Schedules: directives validated against the algorithm and recorded on Funcs."""
