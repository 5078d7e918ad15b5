"""The GRPO learner: extended GRPO (spec section 3, Eq. 2), jitted and sharded over a mesh.

Modules: config (the `rl` config section and why each default), advantages (group advantages,
importance weights u = 1 / (N p)), losses (ratio clipping, KL estimators, aggregation modes),
logprobs (chunked per-token log-probs and entropy), batch (`RLBatch` and the rollout
converter), train_state (`TrainState`, AdamW), train_step (the jitted update), mesh
(placement on ('data', 'fsdp', 'tensor') meshes, global batches from process-local rows).
"""
