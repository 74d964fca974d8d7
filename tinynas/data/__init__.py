"""Labelled windows and where they come from (synthetic generators, public data sets, recordings)."""
