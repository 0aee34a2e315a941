"""The benchmark and simulator (and the unsafe baselines it compares with)."""
