"""nbgrader in the class's JupyterHub (deploy/): one course, one exchange shared by all.

The exchange is the ReadWriteMany volume mounted at ``$ANDREA_EXCHANGE``
(``/srv/nbgrader/exchange``; its root is world-writable with the sticky bit, as nbgrader
documents, set by the pods' init container). The cache stays in each user's home.
Instructors (``$ANDREA_ROLE=instructor``) grade the course in ``~/course`` (a checkout
of the course repository) with the gradebook at ``$NBGRADER_DB_URL``: the PostgreSQL
database the grading Job's shards merge into.
"""
import os
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
c.Exchange.root = os.environ.get("ANDREA_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.cache = str(Path.home() / ".local" / "share" / "jupyter" / "nbgrader_cache")

if os.environ.get("ANDREA_ROLE") == "instructor":
    c.CourseDirectory.root = str(Path.home() / "course")
    if os.environ.get("NBGRADER_DB_URL"):
        c.CourseDirectory.db_url = os.environ["NBGRADER_DB_URL"]
