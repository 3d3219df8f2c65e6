"""The published report: a static site and its markdown, from run records."""
