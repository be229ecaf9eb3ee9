"""Suite ``dma``: random descriptor batches on the memory system against golden."""
