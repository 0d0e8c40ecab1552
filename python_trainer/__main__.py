import sys

from python_trainer.cli import main

sys.exit(main())
