"""Knowledge-base commands: data validate | download | convert."""

from __future__ import annotations

from pathlib import Path

import click

from grasp.cli.common import config_of, queries_option, stark_option


@click.group()
def data() -> None:
    """Validate, download and convert knowledge bases."""


@data.command("validate")
@click.argument("skb_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@stark_option
@queries_option
def validate(skb_dir, stark_dataset, queries_file):
    """Check an SKB (and its queries) completely; print a summary or the first problem."""
    import numpy as np

    from grasp.skb import check_answers, default_queries_path, load_queries, load_skb

    skb = load_skb(skb_dir, stark_dataset=stark_dataset)
    click.echo(f"ok: {skb!r}")
    qpath = queries_file or default_queries_path(skb)
    if qpath.exists():
        queries = check_answers(load_queries(qpath), skb, qpath)
        splits = {s: sum(q.split == s for q in queries) for s in sorted({q.split or "-" for q in queries})}
        click.echo(f"ok: {len(queries)} queries {splits}, mean gold {np.mean([len(q.answer_ids) for q in queries]):.1f}")


@data.command("download")
@click.argument("name", type=click.Choice(["stark-amazon", "stark-mag", "stark-prime"]))
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), help="Target folder (default: under the cache root).")
@click.pass_context
def download(ctx, name, dest):
    """Download a STaRK knowledge base from the Hugging Face Hub (needs network access)."""
    from grasp.skb.download import download_stark

    dataset = name.removeprefix("stark-")
    dest = dest or config_of(ctx).cache_root / "stark" / dataset
    processed = download_stark(dataset, dest)
    click.echo(f"downloaded to {processed}")


@data.command("convert")
@click.argument("stark_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@stark_option
@click.option("--qa", "qa_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="STaRK QA folder of the same dataset (holding stark_qa/ and split/), converted to qa/queries.jsonl.")
@click.option("--human-generated", is_flag=True, help="Convert the human-generated query set instead.")
@click.option("--id-scheme", type=click.Choice(["old", "hf"]), default="old", show_default=True,
              help="Amazon query ids: this repository's old ids, or the Hub's current numbering.")
@click.option("--no-gzip", is_flag=True, help="Write plain nodes.jsonl/edges.tsv.")
def convert(stark_dir, out_dir, stark_dataset, qa_dir, human_generated, id_scheme, no_gzip):
    """Convert a STaRK processed directory to the open SKB format."""
    from grasp.skb import read_stark_qa, read_stark_skb, write_skb

    skb = read_stark_skb(stark_dir, stark_dataset)
    queries = read_stark_qa(qa_dir, human_generated=human_generated, id_scheme=id_scheme) if qa_dir else None
    write_skb(skb, out_dir, compress=not no_gzip, queries=queries)
    click.echo(f"wrote {skb!r} to {out_dir}" + (f" with {len(queries)} queries" if queries else ""))


