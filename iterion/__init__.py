"""iterion: the .bot language, the run store, the durable engine, resume and rewind."""

__version__ = "0.1.0"
