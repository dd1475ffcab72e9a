"""pocforge: one declarative spec per customer GPU POC, turned into a verified answer."""

__version__ = "0.1.0"
