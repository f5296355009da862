"""mFAR's multi-field view of nodes."""

from __future__ import annotations

from grasp.skb.documents import get_layout
from grasp.skb.fields import field_specs, field_text


def test_fields_from_an_open_format_schema(toy_skb):
    specs = field_specs(toy_skb)
    names = [s.name for s in specs]
    assert names == ["name", "full_name", "aliases", "definition", "rel:involved_in", "rel:on_chromosome", "rel:is_a",
                     "single"]
    by = {s.name: s for s in specs}
    layout = get_layout("generic")
    assert field_text(toy_skb, 0, by["aliases"], layout) == "beta3GalT6, EDSSPD2"
    assert field_text(toy_skb, 0, by["definition"], layout) == ""            # genes have no definition
    assert field_text(toy_skb, 4, by["rel:involved_in"], layout) == "gene: SCN1A, SCN2A"
    assert field_text(toy_skb, 1, by["rel:on_chromosome"], layout) == "chromosome: chromosome 2"
    assert field_text(toy_skb, 4, by["single"], layout).startswith("name: sodium ion transport")
    assert field_text(toy_skb, 4, by["rel:involved_in"], layout, max_names=1) == "gene: SCN1A"


def test_stark_field_sets_match_mfar():
    from grasp.skb import SKB
    from grasp.skb.stark import stark_schema

    counts = {d: len(field_specs(SKB.schema_only(stark_schema(d)))) for d in ("amazon", "mag", "prime")}
    # mFAR: Amazon 8 and MAG 5 fields plus "single"; Prime: name, type, details and one per relation, plus "single"
    assert counts == {"amazon": 9, "mag": 6, "prime": 3 + 18 + 1}
