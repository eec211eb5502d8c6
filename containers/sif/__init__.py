"""SIF (Singularity Image Format) files: a native writer and a pure-Python reader."""
