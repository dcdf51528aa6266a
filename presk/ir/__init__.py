"""presk's view of MLIR: the context with presk's dialects loaded, and PSK types."""
