"""The package version: one place, importable from every layer without importing the package."""
__version__ = "0.1.0"
