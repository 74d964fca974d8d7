#!/bin/bash
# Issue 18, fast's own final recipe: 50 epochs with the rate falling from 0.01 along a cosine, raced under the
# same rule (tinynas.search.fast.FAST_RECIPE; measured by benchmarks/race_stopping.py --recipe cosine50). paper
# keeps the method's recipe. fast runs first on all four settings; paper then joins (--merge) on the two
# cheaper ones, the same day, for a same-day ratio (paper takes ~40 min each on the other two).
set -e
cd "$(dirname "$0")/.."
set -x
nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies fast --suffix issue18-cosine-LSM6DSO16IS
nice python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 6m --seeds 0,1,2 --strategies fast --suffix issue18-cosine-STM32F030F4P6
nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-cosine-nRF52840
nice python benchmarks/strategies.py --data cwru --target LSM6DSO16IS --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-cosine-LSM6DSO16IS
echo FASTDONE
nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies paper --merge --suffix issue18-cosine-LSM6DSO16IS
nice python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 6m --seeds 0,1,2 --strategies paper --merge --suffix issue18-cosine-STM32F030F4P6
echo PAPERDONE
