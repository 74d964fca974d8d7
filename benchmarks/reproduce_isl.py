"""Reproduce the method's ISL benchmark: EMG only, 400 x 8, 26 letters.

    python benchmarks/reproduce_isl.py [--budget 8m] [--epochs 15] [--split paper|session]

Targets: the method's three plus a larger board (nRF52840); a 400 x 8 int8 window alone is
3,200 bytes, so the 4 KiB STM32F030F4P6 cannot hold any network of the space.
"""

import sys

from reproduce import SHARED, arguments, run

TARGETS = ("STM32F030F4P6", "STM32C011F6P6", "LSM6DSO16IS", "nRF52840")

if __name__ == "__main__":
    sys.exit(run("isl", "Italian Sign Language alphabet (EMG, 26 letters): method reproduction",
                 arguments(__doc__, f"isl:{SHARED / 'isl'}", TARGETS)))
