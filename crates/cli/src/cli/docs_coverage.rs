//! The docs against the code: every subcommand in the README's command table, every flag with
//! help, every config key in `docs/config.md`, every simulated-engine fault in
//! `docs/simulated-engine.md` and in `sim --help`. The lists come from the code itself (clap's
//! command tree, serde's "expected one of" of each config table, an exhaustive match over the
//! faults), so a new subcommand, key or fault fails this test until it is documented.

use std::path::Path;

use clap::CommandFactory;

use super::Cli;
use infergate_config::config::GateConfig;
use infergate_sim::sim::Fault;

fn doc(name: &str) -> String {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_subcommand_is_in_the_readme_table_and_every_flag_has_help() {
    let readme = doc("README.md");
    let mut missing = Vec::new();
    let cli = Cli::command();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        if !readme.contains(&format!("| `infergate {name}")) {
            missing.push(format!("README command table: `infergate {name}`"));
        }
        if sub.get_about().is_none() {
            missing.push(format!("{name}: no about text"));
        }
        let mut stack = vec![(name.to_string(), sub)];
        while let Some((path, cmd)) = stack.pop() {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}: no help"));
                }
            }
            for nested in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                if nested.get_about().is_none() && nested.get_name() != "help" {
                    missing.push(format!("{path} {}: no about text", nested.get_name()));
                }
                stack.push((format!("{path} {}", nested.get_name()), nested));
            }
        }
    }
    assert!(missing.is_empty(), "undocumented: {missing:#?}");
}

#[test]
fn the_baseline_store_flag_has_one_name() {
    // Every subcommand that reads or writes the store calls it --baseline-dir.
    let cli = Cli::command();
    for name in ["run", "baseline", "changes", "compare", "report"] {
        let sub = cli.find_subcommand(name).expect(name);
        assert!(
            sub.get_arguments()
                .any(|a| a.get_long() == Some("baseline-dir")),
            "{name} has no --baseline-dir"
        );
    }
}

/// The keys serde accepts in one table: an unknown key's error lists them.
fn keys_of(config: &str) -> Vec<String> {
    let err = match GateConfig::parse(config, "probe.toml", Path::new(".")) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the probe key was accepted:\n{config}"),
    };
    let Some((_, list)) = err.split_once("`zz_probe`, expected ") else {
        panic!("no key list in: {err}\n{config}");
    };
    let list = list.split(['\n', '(']).next().unwrap_or("");
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

const BASE: &str = "model = \"m\"\n";
const ENGINE: &str = "[engine]\ncommand = [\"x\"]\n";
const SUITE: &str = "[suites.pr]\nconcurrency = [1]\ncontexts = [0]\n";

#[test]
fn every_config_key_is_in_docs_config_md() {
    let docs = doc("docs/config.md");
    let probe = "zz_probe = 1\n";
    let configs = [
        format!("{probe}{BASE}{ENGINE}{SUITE}"),
        format!("{BASE}{ENGINE}{probe}{SUITE}"),
        format!("{BASE}{ENGINE}[engine.a]\ncommand = [\"x\"]\n{probe}{SUITE}"),
        format!("{BASE}{ENGINE}[engine.watchdog]\n{probe}{SUITE}"),
        format!("{BASE}{ENGINE}{SUITE}{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[[suites.pr.skip]]\nconcurrency = 1\ncontext = 0\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[profile]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[thresholds]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[baseline]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[report]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[adaptive]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[confirm]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[ab]\n{probe}"),
        format!("{BASE}{ENGINE}{SUITE}[bisect]\nbuild = [\"make\"]\n{probe}"),
    ];
    // The decision rule's knobs are explained in docs/statistics.md (the change-point search's
    // in docs/changes.md); config.md lists the common ones and points there.
    let rule_docs = format!(
        "{docs}{}{}",
        doc("docs/statistics.md"),
        doc("docs/changes.md")
    );
    let mut missing = Vec::new();
    for config in &configs {
        let keys = keys_of(config);
        assert!(!keys.is_empty(), "no keys {keys:?} from\n{config}");
        let docs = if config.contains("[thresholds]") {
            &rule_docs
        } else {
            &docs
        };
        for key in keys {
            let documented = [
                format!("`{key}`"),
                format!("[{key}]"),
                format!("[{key}."),
                format!(".{key}]"),
                format!("{key} = "),
            ]
            .iter()
            .any(|form| docs.contains(form.as_str()));
            if !documented {
                missing.push(key);
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "config keys not in docs/config.md: {missing:?}"
    );
}

/// One value of every fault; the match makes a new variant a compile error here.
fn every_fault() -> Vec<Fault> {
    let all = vec![
        Fault::CrashAfter(1.0),
        Fault::NeverReady,
        Fault::Http500(0.5),
        Fault::StallAfter(4),
        Fault::MalformedSse(0.5),
        Fault::FailAboveConcurrency(2),
        Fault::Preempt(None),
        Fault::HangAfter(1.0),
        Fault::LieUsage(2.0),
        Fault::CounterLies(2.0),
        Fault::TruncateAt(4),
        Fault::LlamaCppPython { interrupt: true },
        Fault::StallEvery {
            steps: 4,
            secs: 0.03,
        },
        Fault::PrefillSlowdown(4.0),
        Fault::LongContextSlowdown {
            tokens: 4096,
            factor: 1.1,
        },
        Fault::ChunkedPrefill(256),
        Fault::ItlTail {
            every: 50,
            factor: 2,
        },
        Fault::PromptCounterLies(1.5),
        Fault::AdmitDelay(0.004),
    ];
    for f in &all {
        match f {
            Fault::CrashAfter(_)
            | Fault::NeverReady
            | Fault::Http500(_)
            | Fault::StallAfter(_)
            | Fault::MalformedSse(_)
            | Fault::FailAboveConcurrency(_)
            | Fault::Preempt(_)
            | Fault::HangAfter(_)
            | Fault::LieUsage(_)
            | Fault::CounterLies(_)
            | Fault::TruncateAt(_)
            | Fault::LlamaCppPython { .. }
            | Fault::StallEvery { .. }
            | Fault::PrefillSlowdown(_)
            | Fault::LongContextSlowdown { .. }
            | Fault::ChunkedPrefill(_)
            | Fault::ItlTail { .. }
            | Fault::PromptCounterLies(_)
            | Fault::AdmitDelay(_) => {}
        }
    }
    all
}

#[test]
fn every_sim_fault_is_documented_and_in_sim_help() {
    let docs = doc("docs/simulated-engine.md");
    let cli = Cli::command();
    let sim = cli.find_subcommand("sim").expect("sim");
    let fault_arg = sim
        .get_arguments()
        .find(|a| a.get_long() == Some("fault"))
        .expect("--fault");
    let help = fault_arg
        .get_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut missing = Vec::new();
    for fault in every_fault() {
        let spec = fault.to_string();
        let name = spec.split(['=', '[']).next().unwrap_or(&spec);
        if !docs.contains(&format!("| `{name}")) {
            missing.push(format!("docs/simulated-engine.md fault table: {name}"));
        }
        if !help.contains(name) {
            missing.push(format!("sim --fault help: {name}"));
        }
        assert_eq!(spec.parse::<Fault>().as_ref(), Ok(&fault), "{spec}");
    }
    assert!(missing.is_empty(), "{missing:#?}");
}
