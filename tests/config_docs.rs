//! docs/config.md's defaults tables agree with the code: the `[thresholds]` table with
//! `DecisionRule::default()` (it once said `noise_k` 1.0 and `confidence` 0.95 where the code
//! uses 2.0 and 0.90) and the `[confirm]` table with `ConfirmConfig::default()`. Every documented
//! key must be a field of the struct (or listed here with its own check), and its documented
//! default must equal the struct's, compared as values (`0.90` = `0.9`).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;

use infergate::config::ConfirmConfig;
use infergate::config::FailOn;
use infergate::stats::DecisionRule;
use serde_json::Value;

/// `key → default cell` of the first table under the heading that starts with `heading`.
fn defaults_table(doc: &str, heading: &str) -> BTreeMap<String, String> {
    let section: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    let rows: Vec<Vec<String>> = section
        .iter()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert!(
        rows.len() > 2,
        "no table under `{heading}` in docs/config.md"
    );
    let col = rows[0]
        .iter()
        .position(|h| h == "default")
        .unwrap_or_else(|| panic!("`{heading}` table has no `default` column: {:?}", rows[0]));
    rows[2..]
        .iter()
        .map(|r| (r[0].trim_matches('`').to_string(), r[col].clone()))
        .collect()
}

/// A documented default (`` `"holm"` ``, `0.01`, `` `["aggregate_tps"]` ``) as a JSON value.
fn doc_value(cell: &str) -> Value {
    let text = cell.trim_matches('`');
    let parsed: toml::Table = toml::from_str(&format!("v = {text}"))
        .unwrap_or_else(|e| panic!("documented default `{cell}` is not a TOML value: {e}"));
    serde_json::to_value(&parsed["v"]).expect("toml value to json")
}

fn same(doc: &Value, code: &Value) -> bool {
    match (doc.as_f64(), code.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => doc == code,
    }
}

/// Checks every row of a table against `defaults` (a struct's `Default`, serialised);
/// `others` are documented keys that are not fields of it, each with its own check.
/// A documented key that is not a field of the struct, with the check of its default cell.
type OtherKey<'a> = (&'a str, &'a dyn Fn(&str) -> bool);

fn check(heading: &str, defaults: Value, others: &[OtherKey<'_>]) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/config.md"))
        .expect("docs/config.md");
    let table = defaults_table(&doc, heading);
    for (key, cell) in &table {
        if let Some((_, ok)) = others.iter().find(|(k, _)| k == key) {
            assert!(
                ok(cell),
                "docs/config.md {heading} `{key}`: default {cell} is wrong"
            );
            continue;
        }
        let code = defaults.get(key).unwrap_or_else(|| {
            panic!("docs/config.md {heading} documents `{key}`, which the code does not have")
        });
        assert!(
            same(&doc_value(cell), code),
            "docs/config.md {heading} `{key}`: documented default {cell}, the code's is {code}"
        );
    }
}

#[test]
fn thresholds_defaults_are_the_decision_rules() {
    let fail_on = |cell: &str| {
        serde_json::from_value::<FailOn>(doc_value(cell)).ok() == Some(FailOn::default())
    };
    check(
        "## `[thresholds]`",
        serde_json::to_value(DecisionRule::default()).expect("rule to json"),
        &[("fail_on", &fail_on)],
    );
}

#[test]
fn confirm_defaults_are_the_confirmation_plans() {
    // The two-boot plan has one key.
    check(
        "## `[confirm]`",
        serde_json::json!({ "enabled": ConfirmConfig::default().enabled }),
        &[],
    );
}

#[test]
fn engine_watchdog_defaults_are_the_codes() {
    // The documented defaults written as a config: it must load (every key is one the parser
    // knows, every value valid) into exactly the code's defaults.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/config.md"))
        .expect("docs/config.md");
    let table = defaults_table(&doc, "### `[engine.watchdog]`");
    assert_eq!(table.len(), 4, "{table:?}");
    let body: String = table
        .iter()
        .map(|(k, v)| format!("{k} = {}\n", v.trim_matches('`')))
        .collect();
    let text = format!(
        "[engine]\ncommand = [\"x\"]\n\n[engine.watchdog]\n{body}\n[suites.pr]\nconcurrency = [1]\ncontexts = [\"0\"]\n"
    );
    let cfg = infergate::config::GateConfig::parse(&text, "doc.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("the documented defaults do not load: {e}\n{text}"));
    assert_eq!(
        cfg.engine.watchdog,
        infergate::config::WatchdogConfig::default(),
        "docs/config.md [engine.watchdog] defaults differ from the code's\n{text}"
    );
}
