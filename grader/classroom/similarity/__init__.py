"""Similarity, for the instructor: pairs of learners ranked by how alike their answers are (`pairs`), the
answers reduced to fingerprints (`normalise`), the most alike pairs side by side as HTML (`html`).

May import: intake (the admitted submissions). Used by: `grader similarity` (grader.cli.similarity) only.
"""
