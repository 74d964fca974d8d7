"""Hardware in the loop: the model's C runtime on a board (real, or emulated by QEMU), checked over its UART.

`boards` reads the board files (data, like the targets), `build` writes and cross-compiles the test firmware,
`protocol` speaks its test protocol (the MLPerf Tiny runner's command set) from the host, `qemu` starts an emulated
board with its UART on a pseudo-terminal, and `check` runs a model folder's test windows through it and compares.
"""
