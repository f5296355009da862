"""The lab wing: what chooses, measures and explains the pipeline's settings (tuning on validation, the ablation
report, the sensitivity figures, plans judged by execution, synthesis for a workspace). Serving never imports it."""
