"""``python -m grasp.cli``: the same as the ``grasp`` command."""

from grasp.cli import main

main()
