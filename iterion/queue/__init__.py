"""The run queue on NATS JetStream: deliveries, the per-run lease, the redelivery policy, control.

``iterion runner`` (iterion/runner) claims deliveries; the HTTP service publishes them when it is
started with a queue (``iterion server --nats``). README "Runs across machines" shows the set-up.
"""
