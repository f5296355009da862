"""Data made for tests and benchmarks only (STaRK-shaped synthetic knowledge bases)."""
