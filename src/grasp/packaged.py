"""Paths of the data shipped inside the package: the demo KB, trained artifacts, plan caches."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
DEMO_SKB = DATA / "demo"          # the demo KB (a slice of Debian's package graph)
SHIPPED_MODELS = DATA / "models"  # trained artifacts per schema name: fusion settings, mFAR weights, adapters
SHIPPED_PLANS = DATA / "plans"    # plan caches per schema name
