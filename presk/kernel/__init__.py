"""PSK-Kernel: loop nests over buffers in a machine type, their builder, text and evaluator."""
