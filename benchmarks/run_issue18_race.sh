#!/bin/bash
# Issue 18, fast's first curve verdict at epoch 10 instead of 20 (training/curve_stop.first_verdict; chosen by
# benchmarks/race_stopping.py on recorded curves). paper is unchanged by it; it runs beside fast on the two
# cheaper settings for a same-day ratio, and on the other two after them if the session has the time.
set -e
cd "$(dirname "$0")/.."
set -x
nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies paper,fast --suffix issue18-race-LSM6DSO16IS
nice python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 6m --seeds 0,1,2 --strategies paper,fast --suffix issue18-race-STM32F030F4P6
nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-race-fast-nRF52840
nice python benchmarks/strategies.py --data cwru --target LSM6DSO16IS --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-race-fast-LSM6DSO16IS
echo FASTDONE
nice python benchmarks/strategies.py --data cwru --target LSM6DSO16IS --budget 10m --seeds 0,1,2 --strategies paper --suffix issue18-race-paper-LSM6DSO16IS
nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies paper --suffix issue18-race-paper-nRF52840
echo ALLDONE
