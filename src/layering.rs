//! The layer check: every top-level module's non-test code may only name modules of lower
//! layers (`crate::x` paths), so no change can bring back an import cycle or an upward import.
//! The order is the one written in the crate docs ([`crate`]); a new module gets a layer here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom first. A module may use modules of strictly lower layers (and itself).
const LAYERS: &[&[&str]] = &[
    &["results", "exit", "fsio", "redact"],
    &["untrusted_text"],
    &["stdio", "sim"],
    &["verdict"],
    &["policy"],
    &["answer"],
    &["stats"],
    &["config"],
    &["telemetry"],
    &["bench"],
    &["engine"],
    &["import"],
    &["baseline"],
    &["merge"],
    &["report", "export"],
    &["run"],
    &["eval"],
    &["doctor"],
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The `.rs` files of a top-level module (`src/x.rs`, or everything under `src/x/`).
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut stack = vec![src.join(module)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("module directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Top-level modules a file's non-test code names through `crate::`. The test module (from
/// `#[cfg(test)]` followed by `mod` to the end of the file) and comment lines are not counted.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("crate::") {
            let rest = &line[i + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|p| p.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest],
            };
            for name in names {
                let ident: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !ident.is_empty() {
                    out.insert(ident);
                }
            }
        }
    }
    out
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ") {
            let name = name.trim_end_matches(';');
            assert!(
                layer_of(name).is_some(),
                "module `{name}` has no layer in src/layering.rs"
            );
        }
    }
}

#[test]
fn no_module_imports_one_above_it_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (rank, layer) in LAYERS.iter().enumerate() {
        for module in *layer {
            for file in files_of(&src, module) {
                let text = std::fs::read_to_string(&file).expect("source file");
                for used in named_modules(&text) {
                    if used == *module {
                        continue;
                    }
                    match layer_of(&used) {
                        Some(r) if r < rank => {}
                        Some(_) => violations.push(format!(
                            "{} uses crate::{used}, which is not below `{module}`",
                            file.display()
                        )),
                        // `crate::` followed by something that is not a module (a macro path).
                        None => {}
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_scanner_reads_plain_and_grouped_paths_and_skips_tests_and_comments() {
    let text = "use crate::results::Event;\n\
                use crate::{config, stats::Rule};\n\
                /// See [`crate::report`].\n\
                fn f() { crate::fsio::write_durable(p, b); }\n\
                #[cfg(test)]\n\
                fn helper() { crate::verdict::x(); }\n\
                #[cfg(test)]\n\
                mod tests { use crate::cli; }\n";
    let names: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(names, ["config", "fsio", "results", "stats", "verdict"]);
}
