"""Command-line interface: ``grasp eval | search | index | info | demo | data ...``.

Errors in input (a bad SKB file, an unknown method, a missing index) print one line naming
the problem and exit with status 2; no traceback.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import click

from grasp.cli import data, demo, plans, search, synth, train
from grasp.config import load_config
from grasp.errors import GraspError
from grasp.progress import quiet_third_party


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="TOML config file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config value, e.g. encoder.max_length=512.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Index cache root (default: the config's cache_dir, else $GRASP_CACHE_DIR, else ~/.cache/grasp).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@click.version_option(package_name="grasp-retrieval")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None, overrides: tuple[str, ...], cache_dir: Path | None, quiet: bool) -> None:
    """GRASP: hybrid graph + text retrieval over semi-structured knowledge bases."""
    if quiet:
        quiet_third_party()
    config = load_config(config_file, overrides)
    if cache_dir is not None:
        config = config.model_copy(update={"cache_dir": cache_dir})
    ctx.obj = {"config": config, "progress": not quiet}



for _command in (search.eval_cmd, search.search, search.plan_cmd, search.serve, search.index, search.info, demo.demo,
                 plans.plans, plans.fetch, synth.synthesize, train.prepare, train.train_group, train.tune_group, train.report,
                 data.data):
    cli.add_command(_command)


_CANNOT_WRITE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, standalone_mode=False, prog_name="grasp")
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except GraspError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except OSError as e:
        if e.errno not in _CANNOT_WRITE:
            raise
        click.echo(f"error: cannot write {e.filename or ''} ({e.strerror}): free space or make it writable, or "
                   "point --cache-dir / $GRASP_CACHE_DIR elsewhere", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
