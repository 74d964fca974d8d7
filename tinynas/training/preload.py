"""Imported once by the worker launcher (`tinynas.study.pool`): every worker forked from it starts with
TensorFlow imported. Only imported: a process that has run TensorFlow is not safe to fork."""

import signal

from tinynas.quiet import import_tensorflow

# Ctrl-C in a terminal reaches the whole process group: the study handles it and stops its workers. Without this,
# one landing in the launcher's first seconds (this import) ended it with a traceback under the study's one line.
# The launcher keeps ignoring it, and so do the workers forked from it (as `serve` asks too).
signal.signal(signal.SIGINT, signal.SIG_IGN)
import_tensorflow()
