"""Every measurement that writes docs/*.md, one module per section."""
