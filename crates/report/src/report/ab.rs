//! The A/B section of `summary.md`: the two commands, the boot order and each boot's teardown.

use infergate_io::untrusted_text::markdown as escape;
use infergate_schema::results::AbBoot;

/// The section, after the verdict: `a_cmd`/`b_cmd` are engine-supplied text (escaped).
pub fn summary_section(
    boots: &[AbBoot],
    elapsed_s: f64,
    a_cmd: &str,
    b_cmd: &str,
    order: &str,
) -> String {
    let mut s = String::from("### Paired A/B run\n\n");
    s.push_str(&format!(
        "- **A** (base): `{}`\n- **B** (candidate): `{}`\n- order: {} · {} boots · {:.0} s\n\n",
        escape(a_cmd).replace('`', "'"),
        escape(b_cmd).replace('`', "'"),
        escape(order),
        boots.len(),
        elapsed_s
    ));
    s.push_str("| boot | engine | pair | ready after | teardown |\n|---|---|---|---|---|\n");
    for b in boots {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            b.index + 1,
            b.side.as_str().to_uppercase(),
            b.pair + 1,
            b.boot_s.map_or(
                infergate_schema::answer::NO_VALUE.into(),
                infergate_schema::results::duration_label
            ),
            if b.failure.is_some() {
                "failed"
            } else if b.group_gone {
                "group gone"
            } else {
                "**processes left**"
            }
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;
    use infergate_schema::results::AbSide;

    #[test]
    fn the_section_lists_every_boot_and_escapes_the_commands() {
        let boot = |index: u32, side, group_gone, failure: Option<&str>| AbBoot {
            index,
            pair: index / 2,
            side,
            pgid: Some(100 + index as i32),
            group_gone,
            boot_s: Some(1.25),
            failure: failure.map(str::to_string),
        };
        let s = summary_section(
            &[
                boot(0, AbSide::A, true, None),
                boot(1, AbSide::B, false, None),
                boot(2, AbSide::B, true, Some("died")),
            ],
            12.0,
            "vllm serve <m>",
            "vllm `x`",
            "abba",
        );
        assert!(s.starts_with("### Paired A/B run\n"));
        assert_contains(&s, "`vllm serve &lt;m&gt;`");
        // A backtick cannot close the code span early.
        assert_contains(&s, "`vllm \\'x\\'`");
        assert_contains(&s, "| 1 | A | 1 | 1.2 s | group gone |");
        assert_contains(&s, "| 2 | B | 1 | 1.2 s | **processes left** |");
        assert_contains(&s, "| 3 | B | 2 | 1.2 s | failed |");
        assert_contains(&s, "3 boots · 12 s");
    }
}
