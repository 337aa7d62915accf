//! Seed-style console rendering of a results matrix (under construction).
