"""`python -m python_trainer`: the same command as `godot-ppo` (cli.py)."""

import sys

from python_trainer.cli import main

sys.exit(main())
