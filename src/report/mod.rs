//! Reporting: turns results and verdicts into text for people and machines. A report never
//! measures and never decides.

pub mod markdown;
