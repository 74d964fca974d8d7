#!/bin/bash
# Issue 18's strategies re-run: paper and fast, 3 seeds, four settings, nothing else on the machine.
cd /work/main
set -x
nice python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 6m --seeds 0,1,2 --strategies paper,fast --suffix issue18-STM32F030F4P6
nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies paper,fast --suffix issue18-LSM6DSO16IS
nice python benchmarks/strategies.py --data cwru --target LSM6DSO16IS --budget 10m --seeds 0,1,2 --strategies paper,fast --suffix issue18-LSM6DSO16IS
nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies paper,fast --suffix issue18-nRF52840
echo ALLDONE
