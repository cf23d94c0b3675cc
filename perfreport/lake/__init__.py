"""Stage 5: publish a campaign's kernels and context to an Apache Iceberg lake (gate, writer, query)."""
