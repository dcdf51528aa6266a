"""The command-line tools: `presk` and `presk-opt`."""
