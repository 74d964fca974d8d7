"""tinynas: on-device neural architecture search for microcontroller-sized 1-D conv nets."""

__version__ = "0.1.0"
