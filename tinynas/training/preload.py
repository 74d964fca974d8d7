"""Imported once by the worker launcher (`tinynas.study.pool`): every worker forked from it starts with
TensorFlow imported. Only imported: a process that has run TensorFlow is not safe to fork."""

from tinynas.quiet import import_tensorflow

import_tensorflow()
