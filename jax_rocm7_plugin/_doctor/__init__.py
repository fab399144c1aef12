"""The doctor: the whole check pipeline and more (other plugins, the --deep HIP probe), a typed report, rendering.
May import everything below it (_pipeline, _machine, ...); nothing imports it but __main__ and _cluster."""
