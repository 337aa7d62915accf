//! Reporting: turns results and verdicts into text for people and machines. A report never
//! measures and never decides.

pub mod ab;
pub mod actions;
pub mod bisect;
pub mod changes;
pub mod console;
pub mod github;
pub mod history;
pub mod markdown;
pub mod merged;
pub mod mermaid;
pub mod trend_html;
pub mod verdict_table;
