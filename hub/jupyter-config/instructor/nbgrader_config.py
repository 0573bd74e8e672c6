"""nbgrader as the instructor's server on the course's JupyterHub sees it: every tool on.

The course directory is ``~/andrea-block-lab`` (``scripts/hub.py course`` prepares it:
``solutions/``, the released ``exercises/``, the course's ``nbgrader_config.py`` and the
gradebook); the Formgrader and the command line (``nbgrader collect`` run from that
folder) work on it. The exchange is the class's shared one (``$ANDREA_EXCHANGE``).
"""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
c.CourseDirectory.root = os.path.join(os.path.expanduser("~"), "andrea-block-lab")
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.Exchange.root = os.environ.get("ANDREA_EXCHANGE") or "/srv/nbgrader/exchange"
