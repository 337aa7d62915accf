//! Joining shard results (module under construction).
