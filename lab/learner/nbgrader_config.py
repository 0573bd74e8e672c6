"""nbgrader as a learner's JupyterLab sees it (the Assignment List and Validate).

The course id, and an exchange folder this user can write: ``$ANDREA_EXCHANGE`` when set
(``make lab`` sets ``_build/exchange``), otherwise ``exchange/`` beside this folder (in
the learner's kit: the kit's own ``exchange/``). nbgrader's default exchange,
``/usr/local/share/nbgrader/exchange``, is not writable by an ordinary user.
"""
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
_exchange = Path(os.environ.get("ANDREA_EXCHANGE") or Path(__file__).resolve().parent.parent / "exchange")
_exchange.mkdir(parents=True, exist_ok=True)
c.Exchange.root = str(_exchange)
c.Exchange.cache = str(_exchange.parent / "nbgrader_cache")
