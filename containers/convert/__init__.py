"""Turn a built Docker image into what each site runs: SIF, Shifter, podman-hpc, definition."""
