"""``python -m dpsynth``."""

import sys

from dpsynth.cli import main

sys.exit(main())
