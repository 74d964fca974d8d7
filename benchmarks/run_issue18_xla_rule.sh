#!/bin/bash
# Issue 18, after the XLA rule (training/epoch.py: xla_from): the settings it changes, nothing else on the
# machine. ISL's raced candidates (31 steps per epoch) now train without XLA; CWRU's (90 steps per epoch)
# and every 100-epoch training compile at once, as before, so the CWRU rows of run_issue18_strategies.sh
# stand. `fast` before the rule runs from a worktree of the commit before it, in the same session, for a
# same-day comparison; xla_accuracy.py checks that training without XLA has no direction in accuracy.
set -e
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:-16eea69}
set -x
nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies paper,fast --suffix issue18-xla-rule-LSM6DSO16IS
rm -rf ../tinynas-before && git worktree add -f ../tinynas-before "$BEFORE"
(cd ../tinynas-before && PYTHONPATH=. nice python benchmarks/strategies.py --data isl --target LSM6DSO16IS --budget 8m --seeds 0,1,2 --strategies fast --suffix issue18-before-xla-rule-LSM6DSO16IS)
cp ../tinynas-before/benchmarks/results/strategies-isl-issue18-before-xla-rule-LSM6DSO16IS.* benchmarks/results/
git worktree remove --force ../tinynas-before
nice python benchmarks/strategies.py --data isl --target nRF52840 --budget 10m --seeds 0,1,2 --strategies paper,fast --suffix issue18-xla-rule-nRF52840
nice python benchmarks/epoch_throughput.py --epochs 12
nice python benchmarks/xla_accuracy.py --seeds 8
echo ALLDONE
