"""Hidden test specs, one module per chapter. Never shipped to learners."""
