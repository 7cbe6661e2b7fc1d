"""Telling ready from failure while a server starts: the watcher (one log stream plus
looks at process/port/health), the wait loop, per-phase budgets and the progress text.
"""
