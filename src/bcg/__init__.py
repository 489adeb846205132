"""bcg: Bundled Contact Gradients for stable first-order policy learning through stiff contact."""

__version__ = "0.1.0"
