"""The IRDL definitions of presk's dialects (`*.irdl.mlir`), installed as package data."""
