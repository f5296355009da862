"""Summaries of planning runs: share of valid plans, repairs, rejections, timing, and the shapes of the usable plans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from grasp.plan.bank import plan_shape


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
        "shapes": shape_statistics([o.check.plan for o in outcomes if o.check.usable]),
    }


def shape_statistics(plans: list) -> dict:
    """What the usable plans look like: how many anchors and hops each has (a count's share of the plans), how
    anchors are matched (name or doc), which relations the hops use, and how many distinct shapes (a plan with its
    anchor names and relevance text blanked) they fall into; read when query text comes without a graph to run on."""
    n = len(plans)
    dumps = [p.dump() for p in plans]

    def shares(counter: Counter) -> dict:
        return {str(k): v / n for k, v in sorted(counter.items())}

    return {
        "plans": n,
        "anchors": shares(Counter(len(d["anchors"]) for d in dumps)) if n else {},
        "hops": shares(Counter(len(d["hops"]) for d in dumps)) if n else {},
        "match_modes": dict(Counter(a.get("match_mode", "name") for d in dumps for a in d["anchors"])),
        "relations": dict(Counter(h["rel"] for d in dumps for h in d["hops"]).most_common()),
        "distinct_shapes": len({plan_shape(d) for d in dumps}),
    }
