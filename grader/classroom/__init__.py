"""The class: what runs a course on nbgrader (staging, judging through the pool, recording, the term)."""
