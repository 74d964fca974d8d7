"""firmware_bridge: the serial link between a sensor front-end and tinynas."""

from importlib import metadata as _metadata

try:  # both packages ship in the tinynas distribution, whose version is written in tinynas/__init__.py
    __version__ = _metadata.version("tinynas")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
