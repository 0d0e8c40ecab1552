"""The commands around training: export, envs/launch, export-policy, import-policy, play, record, profile, tune."""
