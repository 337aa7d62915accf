//! Reporting: turns results and verdicts into text for people and machines. A report never
//! measures and never decides.

pub mod actions;
pub mod console;
pub mod github;
pub mod markdown;
pub mod merged;
pub mod mermaid;
pub mod verdict_table;
