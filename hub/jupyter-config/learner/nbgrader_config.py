"""nbgrader as a learner's server on the course's JupyterHub sees it.

The course id and the class's shared exchange (``$ANDREA_EXCHANGE``, which the hub's
spawner sets; ``/srv/nbgrader/exchange`` by default). Fetched assignments and fetched
feedback land in the learner's home, where the server starts. The Assignment List and
Validate are the only nbgrader tools on (``jupyter_server_config.json`` and
``labconfig/page_config.json`` beside this file).
"""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
c.Exchange.root = os.environ.get("ANDREA_EXCHANGE") or "/srv/nbgrader/exchange"
