"""Instructor tooling of the ANDREA Block Lab course.

- :mod:`classroom.grade`: grade a whole class, sandboxed and in parallel
  (``python -m classroom.grade SUBMISSIONS``);
- :mod:`classroom.sandbox`: the bubblewrap sandbox every learner kernel runs in;
- :mod:`classroom.collect`: reading submissions from a folder or a zip, safely;
- :mod:`classroom.merge`: merging the workers' gradebooks into the course gradebook;
- :mod:`classroom.report`, :mod:`classroom.feedback`: what the instructor and the
  learners read afterwards;
- :mod:`classroom.instructor_book`: the instructor edition of the book;
- :mod:`classroom.scan`: the leak scan of the learner edition.
"""
