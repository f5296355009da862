"""Summaries of planning runs: share of valid plans, repairs, rejections, timing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np


def summarise(outcomes: Iterable) -> dict:
    outcomes = list(outcomes)
    status = Counter(o.check.status for o in outcomes)
    n = len(outcomes)
    fresh = [o.seconds for o in outcomes if not o.cached]
    reasons = Counter((o.check.reason or "").split(":")[0] for o in outcomes if o.check.status == "rejected")
    risk = Counter(o.check.plan.risk_level for o in outcomes)
    return {
        "n": n,
        "valid": status["valid"] / n if n else 0.0,
        "repaired": status["repaired"] / n if n else 0.0,
        "usable": (status["valid"] + status["repaired"]) / n if n else 0.0,
        "rejected": status["rejected"] / n if n else 0.0,
        "empty": status["empty"] / n if n else 0.0,
        "first_try_usable": sum(o.attempts <= 1 and o.check.usable for o in outcomes) / n if n else 0.0,
        "risk_levels": dict(risk),
        "reject_reasons": dict(reasons.most_common(10)),
        "llm_calls": len(fresh),
        "seconds_per_plan_p50": float(np.median(fresh)) if fresh else None,
        "seconds_per_plan_mean": float(np.mean(fresh)) if fresh else None,
    }
