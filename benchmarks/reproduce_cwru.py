"""Reproduce the method's CWRU benchmark: bearingnas10, fan end, first 200 windows per file.

    python benchmarks/reproduce_cwru.py [--budget 8m] [--epochs 15] [--split paper|segment]

The normal baseline is kept at 48 kHz as in the method's code (resample=0), because 200
windows of 512 samples do not fit in it once resampled to 12 kHz; `--split segment` with
`--data "cwru:PATH"` runs the resampled, leakage-aware variant.
"""

import sys

from reproduce import SHARED, arguments, run

TARGETS = ("STM32F030F4P6", "STM32C011F6P6", "LSM6DSO16IS")

if __name__ == "__main__":
    data = f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&window=512&windows_per_file=200&resample=0"
    sys.exit(run("cwru", "CWRU bearing faults (bearingnas10, fan end): method reproduction",
                 arguments(__doc__, data, TARGETS)))
