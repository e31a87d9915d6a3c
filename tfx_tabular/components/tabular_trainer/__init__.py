"""TabularTrainer: training over the Examples artifact, in TFX's component shape: `component`,
`spec` (channel names and parameters, declared once), `executor`; `user_code` (a user's
`model_fn` / `run_fn` module) and `vertex` (VertexTraining: the same training as a Vertex AI job)."""

__all__ = [
    "component",
    "executor",
    "spec",
    "user_code",
    "vertex",
]
