"""Developer tools, not part of the installed tinynas: the emulated microcontrollers that check the generated C
(`emulate`, with its harness, startup and linker scripts in `mcu/`) and trained-like random weights for the
cost-model checks (`random_weights`), and the machine's measured speed that tests scale budgets by
(`machine_speed`). Tests and benchmarks import them from the repository root."""
