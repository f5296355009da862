"""The lab wing: what chooses, measures and explains the pipeline's settings (tuning on validation, the ablation
report, the sensitivity figures, plans judged by execution). Serving never imports it."""
