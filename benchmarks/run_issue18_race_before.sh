#!/bin/bash
# Issue 18: `fast` before the first verdict moved to epoch 10 (commit 9313a03), from a worktree, in the same session
# as run_issue18_race.sh, for a same-day comparison on all four settings (the VM's speed changes from day to day).
set -e
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-9313a03}
set -x
rm -rf ../tinynas-before && git worktree add -f ../tinynas-before "$BEFORE"
cd ../tinynas-before
PYTHONPATH=. nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies fast --suffix issue18-before-race-LSM6DSO16IS
PYTHONPATH=. nice python benchmarks/strategies.py --data cwru --target STM32F030F4P6 --budget 6m --seeds 0,1,2 --strategies fast --suffix issue18-before-race-STM32F030F4P6
PYTHONPATH=. nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-before-race-nRF52840
PYTHONPATH=. nice python benchmarks/strategies.py --data cwru --target LSM6DSO16IS --budget 10m --seeds 0,1,2 --strategies fast --suffix issue18-before-race-LSM6DSO16IS
cp benchmarks/results/strategies-*-issue18-before-race-* ../main/benchmarks/results/
cd ../main
git worktree remove --force ../tinynas-before
echo ALLDONE
