"""firmware_bridge: the serial link between a sensor front-end and tinynas."""

__version__ = "0.1.0"
