"""Sweeps: a grid of searches (data, targets, strategies, budgets, seeds, any search option), each a normal search
in its own folder, run here and resumable, summed up in one table (`tinynas sweep GRID.toml --out DIR`)."""
