"""Helpers the tests share (imported as `tests.support...`; not tests themselves)."""
