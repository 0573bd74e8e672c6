"""python -m andrea_lab: start the learner's kit (andrea_lab.launch)."""
import sys

from .launch import main

sys.exit(main())
