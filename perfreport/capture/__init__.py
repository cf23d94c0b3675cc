"""Stage 1: scoped ncu capture from live inference processes.

Modules: spec (capture spec from flags or YAML), policy (safety rules), plan (exact ncu/kubectl argv),
preflight (environment checks), diagnose (why a capture failed or came back empty), receipt (capture receipt
JSON), run (local launch-and-attach / attach), k8s (kubectl debug sidecar, sister deployment), harness
(single-op replay). Everything here imports only the standard library, click and pyyaml at module level, so
it runs on a GPU machine that has neither pydantic nor DuckDB.
"""
