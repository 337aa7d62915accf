//! GitHub Actions files: job summary, step outputs, workflow commands (under construction).
