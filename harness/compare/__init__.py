"""`harness compare`: two result sets joined and where they differ said (`join`: two hosts,
two images or two fits), each side read through the gate (`app`)."""
