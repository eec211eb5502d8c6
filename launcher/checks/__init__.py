"""Every check of a planned launch, in one registry, and what a check says."""
