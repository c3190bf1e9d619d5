"""`harness compare`: two result sets joined and where they differ said (`join`: two hosts
or two images), each side read through the gate (`app`)."""
