"""nbgrader in a person's server on the class's Zero to JupyterHub (deploy/z2jh/values.yaml).

The image puts this file in both Jupyter configuration folders, ``/etc/andrea/learner`` and
``/etc/andrea/instructor``; the hub's pre-spawn hook sets ``JUPYTER_CONFIG_DIR`` and
``ANDREA_ROLE`` for each person. nbgrader's server extensions (the Formgrader too) read their
configuration from the Jupyter configuration path and the server's working folder, which is
why the course is configured here and not only in the course folder.

- Everyone: the course id, and ngshare as the exchange (``$ANDREA_NGSHARE_URL``): release,
  fetch, submit, collect and feedback go through the ngshare service with the person's own
  hub token. There is no shared folder.
- Instructors: the course folder ``~/course`` (``andrea-singleuser`` copies it there on the
  first start), with the course's own settings read from its ``nbgrader_config.py``
  (nbgrader's source and release folders ``solutions/`` and ``exercises/``, execution
  limits, and the gradebook at ``$NBGRADER_DB_URL``, the class's PostgreSQL database).
"""
import os
from pathlib import Path

from ngshare_exchange import configureExchange

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
configureExchange(c, os.environ.get("ANDREA_NGSHARE_URL") or "http://ngshare:8080/services/ngshare")

if os.environ.get("ANDREA_ROLE") == "instructor":
    course = Path(os.environ.get("ANDREA_COURSE_DIR") or Path.home() / "course")
    own = course / "nbgrader_config.py"
    image = Path(os.environ.get("ANDREA_COURSE_SOURCE") or "/opt/andrea-block-lab") / "nbgrader_config.py"
    load_subconfig(str(own if own.is_file() else image))  # noqa: F821 (provided by traitlets)
    c.CourseDirectory.root = str(course)
