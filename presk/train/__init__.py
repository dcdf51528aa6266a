"""Training: data windows, the training step as one PSK-Core function, and the loop."""
