"""Rendering: HTML, Markdown, JSON, JUnit and charts from the explanation and the
model's tables (``context`` is the one object the templates display)."""
