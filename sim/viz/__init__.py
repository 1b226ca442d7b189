"""Pictures: topology drawings, chunk diagrams, link timelines and bandwidth plots (matplotlib)."""
