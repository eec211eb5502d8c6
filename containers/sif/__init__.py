"""SIF (Singularity Image Format) files: the native writer (writer.py) and a pure-Python reader
(reader.py), over the format (format.py, layout.py) and the root filesystem stream (tarstream.py)."""
