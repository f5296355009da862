"""A knowledge base from outside the repository's data: WordNet 3.0 (Debian's ``wordnet-base`` package) written
in the open SKB format, for trying the zero-label path on a KB that nothing here was tuned on.

A slice of WordNet keeps the index build short on a CPU: the noun synsets of a few lexicographer files (animals,
food, body parts, substances by default) become ``concept`` nodes, their files ``category`` nodes, and the verb
synsets of a few verb files (consumption and body by default) ``action`` nodes. Relations are WordNet's pointers
between synsets that both lie in the slice:

    concept -is_a-> concept            hypernym and instance hypernym (a relation joining a type to itself)
    concept -part_of-> concept         part holonym
    concept -member_of-> concept       member holonym (a species of its genus, a genus of its family)
    concept -made_of-> concept         substance meronym
    concept -in_category-> category    the synset's lexicographer file
    concept -related_to-> action       derivationally related forms (noun to verb)
    action  -specializes-> action      verb hypernym
    action  -entails-> action          verb entailment

    apt-get install wordnet-base        # the WordNet 3.0 database files, /usr/share/wordnet
    python bench/wordnet_kb.py --out /tmp/wordnet-skb [--wordnet /usr/share/wordnet] \\
        [--nouns animal,food,body,substance] [--verbs consumption,body]
    grasp data validate /tmp/wordnet-skb

The directory has no ``qa/`` folder: it is a KB nobody labelled. WordNet's license (Princeton) allows this use;
the files are derived at run time and never committed here.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from grasp.storage import atomic_dir

# WordNet 3.0's lexicographer files by number (its ``lexnames`` list)
LEXNAMES = {
    3: "noun.Tops", 4: "noun.act", 5: "noun.animal", 6: "noun.artifact", 7: "noun.attribute", 8: "noun.body",
    9: "noun.cognition", 10: "noun.communication", 11: "noun.event", 12: "noun.feeling", 13: "noun.food",
    14: "noun.group", 15: "noun.location", 16: "noun.motive", 17: "noun.object", 18: "noun.person",
    19: "noun.phenomenon", 20: "noun.plant", 21: "noun.possession", 22: "noun.process", 23: "noun.quantity",
    24: "noun.relation", 25: "noun.shape", 26: "noun.state", 27: "noun.substance", 28: "noun.time",
    29: "verb.body", 30: "verb.change", 31: "verb.cognition", 32: "verb.communication", 33: "verb.competition",
    34: "verb.consumption", 35: "verb.contact", 36: "verb.creation", 37: "verb.emotion", 38: "verb.motion",
    39: "verb.perception", 40: "verb.possession", 41: "verb.social", 42: "verb.stative", 43: "verb.weather",
}

# pointer symbol -> (relation, whether the edge runs from the pointer's target to its source)
NOUN_POINTERS = {"@": ("is_a", False), "@i": ("is_a", False), "#p": ("part_of", False),
                 "%p": ("part_of", True), "#m": ("member_of", False), "%m": ("member_of", True),
                 "%s": ("made_of", False), "#s": ("made_of", True)}
VERB_POINTERS = {"@": ("specializes", False), "*": ("entails", False)}

SCHEMA = {
    "name": "wordnet",
    "description": "A slice of WordNet 3.0: noun synsets (concepts) of a few lexicographer files, their files "
                   "(categories) and verb synsets (actions), linked by WordNet's semantic pointers.",
    "node_types": {
        "concept": {"name_field": "name", "text_fields": ["definition", "synonyms", "examples"]},
        "category": {"name_field": "name", "text_fields": ["description"]},
        "action": {"name_field": "name", "text_fields": ["definition", "synonyms", "examples"]},
    },
    "relations": [
        {"name": "is_a", "source": "concept", "target": "concept", "description": "hyponym to hypernym"},
        {"name": "part_of", "source": "concept", "target": "concept", "description": "part to whole"},
        {"name": "member_of", "source": "concept", "target": "concept", "description": "member to group"},
        {"name": "made_of", "source": "concept", "target": "concept", "description": "thing to its substance"},
        {"name": "in_category", "source": "concept", "target": "category", "description": "lexicographer file"},
        {"name": "related_to", "source": "concept", "target": "action", "description": "derivationally related"},
        {"name": "specializes", "source": "action", "target": "action", "description": "verb to its hypernym"},
        {"name": "entails", "source": "action", "target": "action", "description": "verb to what it entails"},
    ],
    "candidate_types": ["concept", "action"],
}


def parse_data(path: Path) -> dict[str, dict]:
    """The synsets of a WordNet ``data.<pos>`` file: offset -> lexname, lemmas, pointers, gloss."""
    synsets = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):  # the license header
            continue
        head, _, gloss = line.partition(" | ")
        parts = head.split()
        offset, lexnum, words = parts[0], int(parts[1]), int(parts[3], 16)
        lemmas = [parts[4 + 2 * i].replace("_", " ") for i in range(words)]
        at = 4 + 2 * words
        pointers = []
        for i in range(int(parts[at])):
            symbol, target, pos = parts[at + 1 + 4 * i: at + 4 + 4 * i]
            pointers.append((symbol, target, pos))
        definition, *examples = [s.strip() for s in gloss.strip().split(";")]
        synsets[offset] = {"lexname": LEXNAMES[lexnum], "lemmas": lemmas, "pointers": pointers,
                           "definition": definition,
                           "examples": [e.strip('"') for e in examples if e.startswith('"')]}
    return synsets


def build(wordnet: Path, out: Path, nouns: list[str], verbs: list[str]) -> tuple[int, int]:
    """Write the slice into ``out`` (built beside it and renamed when complete); (nodes, edges)."""
    noun_files = {f"noun.{n}" for n in nouns}
    verb_files = {f"verb.{v}" for v in verbs}
    unknown = (noun_files | verb_files) - set(LEXNAMES.values())
    if unknown:
        raise SystemExit(f"not WordNet lexicographer files: {', '.join(sorted(unknown))}")
    noun_data, verb_data = parse_data(wordnet / "data.noun"), parse_data(wordnet / "data.verb")
    ids: dict[tuple[str, str], int] = {}
    nodes: list[dict] = []

    def add(key, node_type, name, fields):
        ids[key] = len(nodes)
        nodes.append({"id": len(nodes), "type": node_type, "name": name, "fields": fields})

    for lexname in sorted(noun_files):
        add(("c", lexname), "category", lexname.split(".", 1)[1],
            {"description": f"WordNet's {lexname} lexicographer file"})
    for pos, data, files, node_type in (("n", noun_data, noun_files, "concept"), ("v", verb_data, verb_files, "action")):
        for offset, s in data.items():
            if s["lexname"] in files:
                fields = {"definition": s["definition"]}
                if len(s["lemmas"]) > 1:
                    fields["synonyms"] = s["lemmas"][1:]
                if s["examples"]:
                    fields["examples"] = s["examples"]
                add((pos, offset), node_type, s["lemmas"][0], fields)
    edges: set[tuple[int, str, int]] = set()
    for pos, data, pointers in (("n", noun_data, NOUN_POINTERS), ("v", verb_data, VERB_POINTERS)):
        for offset, s in data.items():
            source = ids.get((pos, offset))
            if source is None:
                continue
            if pos == "n":
                edges.add((source, "in_category", ids[("c", s["lexname"])]))
            for symbol, target_offset, target_pos in s["pointers"]:
                if symbol == "+" and pos == "n" and target_pos == "v" and ("v", target_offset) in ids:
                    edges.add((source, "related_to", ids[("v", target_offset)]))
                elif symbol in pointers and target_pos == pos and (pos, target_offset) in ids:
                    relation, reverse = pointers[symbol]
                    target = ids[(pos, target_offset)]
                    edges.add((target, relation, source) if reverse else (source, relation, target))
    with atomic_dir(out) as tmp:  # built beside it, renamed into place when complete
        (tmp / "schema.json").write_text(json.dumps(SCHEMA, indent=1) + "\n")
        with gzip.open(tmp / "nodes.jsonl.gz", "wt", encoding="utf-8") as f:
            for node in nodes:
                f.write(json.dumps(node, ensure_ascii=False) + "\n")
        with gzip.open(tmp / "edges.tsv.gz", "wt", encoding="utf-8") as f:
            f.write("source\trelation\ttarget\n")
            for source, relation, target in sorted(edges):
                f.write(f"{source}\t{relation}\t{target}\n")
        (tmp / "README.md").write_text(
            f"# WordNet 3.0 slice\n\nNouns of {', '.join(sorted(noun_files))}; verbs of {', '.join(sorted(verb_files))}."
            f"\nMade by bench/wordnet_kb.py from {wordnet}. WordNet 3.0 Copyright 2006 by Princeton University.\n")
    return len(nodes), len(edges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the SKB directory to write")
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"), help="WordNet's dict folder")
    parser.add_argument("--nouns", default="animal,food,body,substance", help="noun lexicographer files")
    parser.add_argument("--verbs", default="consumption,body", help="verb lexicographer files")
    args = parser.parse_args()
    if not (args.wordnet / "data.noun").exists():
        raise SystemExit(f"{args.wordnet}/data.noun not found: apt-get install wordnet-base, or pass --wordnet")
    n_nodes, n_edges = build(args.wordnet, args.out, args.nouns.split(","), args.verbs.split(","))
    print(f"{args.out}: {n_nodes} nodes, {n_edges} edges")


if __name__ == "__main__":
    main()
