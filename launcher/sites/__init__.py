"""Site profiles: the built-in ones (the YAML files here), their model, loading and trust, and
what a login node tells of its site."""
