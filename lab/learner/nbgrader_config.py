"""nbgrader as a learner's JupyterLab sees it (the Assignment List and Validate).

The course id, and the exchange ``$ANDREA_EXCHANGE`` when it is set (``make lab`` sets
``_build/exchange``, a folder this user can write). Without it (the learner's kit on a
laptop) there is no exchange to hand work in through: the Assignment List is hidden
(``andrea_lab.server``) and the notebook file is handed in as the instructor says.
"""
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
if os.environ.get("ANDREA_EXCHANGE"):
    _exchange = Path(os.environ["ANDREA_EXCHANGE"])
    _exchange.mkdir(parents=True, exist_ok=True)
    c.Exchange.root = str(_exchange)
    c.Exchange.cache = str(_exchange.parent / "nbgrader_cache")
