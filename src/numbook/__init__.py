"""numbook: executable worked problems whose every typed number is checked."""

__version__ = "0.1.0"
