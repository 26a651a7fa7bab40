"""Where a preprocessor finds the course's folders: nbgrader's own CourseDirectory, configured
from the same config the running nbgrader command read (its root and directory structure)."""

from __future__ import annotations

from pathlib import Path

from nbgrader.coursedir import CourseDirectory


def course_folder(preprocessor, step: str, student: str, assignment: str) -> Path:
    """The folder of `assignment` for `student` at `step` ("release", "submitted", "autograded")."""
    coursedir = CourseDirectory(config=preprocessor.config)
    return Path(coursedir.format_path(getattr(coursedir, f"{step}_directory"), student, assignment))
