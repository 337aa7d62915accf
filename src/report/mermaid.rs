//! Mermaid charts for the job summary (under construction).
