//! Reporting: turns results and verdicts into text for people and machines. A report never
//! measures and never decides.

pub(crate) mod ab;
pub(crate) mod actions;
pub(crate) mod bisect;
pub(crate) mod changes;
pub(crate) mod console;
pub mod github;
pub(crate) mod history;
pub(crate) mod layout;
pub(crate) mod markdown;
pub(crate) mod merged;
pub mod mermaid;
pub(crate) mod trend_html;
pub(crate) mod verdict_table;
