"""Developer tooling shipped with the package: building the offline CPU test images
(`harness images build`). Nothing in a sweep imports it."""
