"""nbgrader's exchange for ``make lab-instructor``: the same folder as the learner's lab
(``$ANDREA_EXCHANGE``, set by ``scripts/lab.py`` to ``_build/exchange``). The course itself
is configured by the repository's ``nbgrader_config.py``."""
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
_exchange = Path(os.environ.get("ANDREA_EXCHANGE") or Path(__file__).resolve().parents[2] / "_build" / "exchange")
_exchange.mkdir(parents=True, exist_ok=True)
c.Exchange.root = str(_exchange)
c.Exchange.cache = str(_exchange.parent / "nbgrader_cache")
