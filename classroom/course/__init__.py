"""The course stage: what a grading run grades with, fixed when it starts.

- :mod:`.snapshot`: the copy of the course (``OUT/course/<fingerprint>``) every later
  stage reads, and the fingerprint that decides what a resumed run regrades;
- :mod:`.template`: the assignments generated from it once (``OUT/template``: the
  gradebook every worker starts from, the independent check's plans).

A course manifest (one place naming each assignment) would be read here.
"""
