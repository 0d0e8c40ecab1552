"""docs/training.md's section on variants, written from the code: the rules between variants and train's flags that
go only with another.

    .venv/bin/python -m python_trainer.tools.variant_matrix --write-docs     # without --write-docs: on stdout

The table is base/combinations.py's; the flags are run/train.py's Args, which sit above base/, so the writer is here
and base/combinations.py only takes them."""

from __future__ import annotations

import sys

from python_trainer.base import combinations
from python_trainer.run.train import Args


def write_docs() -> None:
    """docs/training.md's generated section written again."""
    page = combinations.DOCS.read_text(encoding="utf-8")
    combinations.DOCS.write_text(combinations.with_matrix(page, Args), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-docs"]:
        write_docs()
    else:
        sys.stdout.write(combinations.section(Args))
