"""XML Schemas shipped with WebRACE (read with importlib.resources, so eggs work)."""
