"""``python -m classroom SUBMISSIONS ...`` is ``python -m classroom.grade``."""
import sys

from .grade import main

sys.exit(main())
