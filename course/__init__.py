"""Learner-facing helpers: public checks, toy data and plots. No reference code lives here."""
