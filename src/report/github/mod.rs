//! GitHub check runs and sticky PR comments through octocrab (under construction).
