"""Safe I/O and validation: untrusted files read with caps, outputs written atomically, every user number checked."""
