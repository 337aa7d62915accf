//! One engine boot resolved from the config: the command with its placeholders filled in, the
//! engine's environment (an allow-list, never the gate's credentials), and the secrets of both
//! registered with the process's [`infergate_io::redact`] before anything of the engine is written.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use super::EngineError;
use infergate_config::config::{CommandSpec, EngineConfig, EngineIsolation};

/// Variables of the gate's environment every engine gets (names, or prefixes ending in `_`).
/// Anything else must be named in `[engine] env_allow` or set in `[engine] env`.
pub(crate) const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_",
    "NCCL_",
    "HF_",
    "NVIDIA_",
];

/// Default SIGTERM → SIGKILL grace inside GitHub Actions: the runner gives a cancelled step
/// about 7.5 s after SIGINT before SIGTERM and 2.5 s more before SIGKILL, and teardown plus
/// writing the results must fit in that window.
pub(crate) const ACTIONS_STOP_GRACE: Duration = Duration::from_secs(5);
/// Default grace outside Actions.
pub(crate) const LOCAL_STOP_GRACE: Duration = Duration::from_secs(15);

/// The grace used when the config sets no `stop_grace`.
pub(crate) fn default_stop_grace() -> Duration {
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
        ACTIONS_STOP_GRACE
    } else {
        LOCAL_STOP_GRACE
    }
}

/// Everything needed to start one engine: the command with placeholders resolved.
#[derive(Debug, Clone)]
pub struct EngineLaunch {
    /// Program and arguments as executed.
    pub argv: Vec<String>,
    /// The engine's whole environment: the allow-listed part of the gate's, then `[engine]
    /// env` (values rendered).
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub workdir: Option<PathBuf>,
    /// The command line for people and results files, secrets masked.
    pub display: String,
    /// Where the gate writes the engine's output (the engine is not told).
    pub log_path: PathBuf,
    /// Base URL the engine will serve on.
    pub base_url: String,
    /// Readiness time-out.
    pub readiness_timeout: Duration,
    /// SIGTERM → SIGKILL grace at teardown.
    pub stop_grace: Duration,
    /// Bearer token for readiness probes (never shown).
    pub api_key: Option<String>,
    /// The binary that runs `__supervise` (this infergate).
    pub supervisor: PathBuf,
    /// What the engine is kept from (`[engine] isolation`).
    pub isolation: EngineIsolation,
    /// This infergate binary, opened by the gate, when the engine runs as another user: then
    /// `{infergate}` is executed as `/proc/self/fd/N` ([`SelfExec`]).
    pub self_exec: Option<SelfExec>,
}

/// The gate's own executable, opened as the gate's user, for an engine that runs as another
/// one (`isolation = "auto"` under root: uid 65534).
///
/// Why a descriptor: `{infergate}` names this binary, and a root gate's binary often sits
/// where uid 65534 cannot reach it (a checkout under `/root`, mode 0700: `cargo test` and
/// `cargo run -- run` in a fresh clone). The gate opens `/proc/self/exe` (the very binary it
/// runs, even if the checkout was rebuilt meanwhile) and renders `{infergate}` as
/// `/proc/self/fd/N`; the descriptor loses `FD_CLOEXEC` only in the supervisor's child, so the
/// supervisor and then the engine inherit it, and the engine's `exec` of `/proc/self/fd/N`
/// (its own descriptor table) needs only the file's mode (0755 from cargo), not a path the
/// engine's user can walk. Both command forms work: an argument vector execs it directly, and
/// a shell line's `exec {infergate} sim …` execs it from the shell that inherited it.
///
/// Rejected: a copy in a temporary directory readable by the engine's user costs a copy of
/// the binary per gate (about 100 MB for a debug build), fails where the temporary directory
/// is mounted `noexec`, and leaves the copy behind when the gate is SIGKILLed; the descriptor
/// needs no disk, no cleanup, and nothing the engine could replace between the copy and the
/// exec. What the engine gains is a read-only descriptor of a file any user may read by its
/// mode: the gate's binary, which is no secret.
#[derive(Debug, Clone)]
pub struct SelfExec {
    fd: std::sync::Arc<std::os::fd::OwnedFd>,
}

impl SelfExec {
    /// Opens this process's executable when `isolation` makes the engine another user (root
    /// gate, `isolation` not `off`); `None` otherwise or where `/proc/self/exe` cannot be opened
    /// (then `{infergate}` is its path, as before).
    fn open(isolation: EngineIsolation) -> Option<SelfExec> {
        if !super::is_root() || isolation.user().is_none() || !cfg!(target_os = "linux") {
            return None;
        }
        let file = std::fs::File::open("/proc/self/exe").ok()?;
        Some(SelfExec {
            fd: std::sync::Arc::new(file.into()),
        })
    }

    /// The descriptor's number (the same in the supervisor and the engine).
    pub(crate) fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// `/proc/self/fd/N`: the path the engine executes.
    pub(crate) fn path(&self) -> String {
        format!("/proc/self/fd/{}", self.raw_fd())
    }
}

/// Values substituted into the command.
#[derive(Debug, Clone)]
pub struct Placeholders {
    /// `{port}`: the port the engine listens on.
    pub(crate) port: u16,
    /// `{host}`: the address the engine binds.
    pub(crate) host: String,
    /// `{model}`: the model to serve, when the config names one.
    pub(crate) model: Option<String>,
    /// Path of the running infergate binary (`{infergate}`), so configs can boot `infergate sim`.
    pub(crate) infergate: String,
}

impl Placeholders {
    /// `s` with the placeholders replaced; with `quote`, every value is shell-quoted (a shell
    /// line: a model named `m$(touch PWNED)` stays one literal word).
    fn render(&self, s: &str, quote: bool) -> String {
        let q = |v: &str| if quote { shell_quote(v) } else { v.to_string() };
        let mut out = s
            .replace("{port}", &self.port.to_string())
            .replace("{host}", &q(&self.host))
            .replace("{infergate}", &q(&self.infergate));
        if let Some(m) = &self.model {
            out = out.replace("{model}", &q(m));
        }
        out
    }
}

/// Whether `v` is an absolute path that exists (a program, a model, a cache directory).
pub(crate) fn names_a_path(v: &str) -> bool {
    let p = std::path::Path::new(v);
    p.is_absolute() && p.exists()
}

/// Picks a free TCP port on `host` (bind port 0, read it, release it).
pub fn free_port(host: &str) -> Result<u16, EngineError> {
    let bind_host = if host == "0.0.0.0" || host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let failed = |source| EngineError::Port {
        host: host.to_string(),
        source,
    };
    let listener = TcpListener::bind((bind_host, 0)).map_err(failed)?;
    Ok(listener.local_addr().map_err(failed)?.port())
}

/// Quotes one word for `sh`.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Whether `name` matches an allow-list entry: an exact name, `PREFIX_` (built-in) or
/// `PREFIX*` (config).
pub(crate) fn allowed(name: &str, entry: &str) -> bool {
    if let Some(prefix) = entry.strip_suffix('*') {
        name.starts_with(prefix)
    } else if entry.ends_with('_') {
        name.starts_with(entry)
    } else {
        name == entry
    }
}

/// The engine's environment from the gate's: the allow-listed variables, then `extra`
/// (`[engine] env`); the gate's credentials never, whatever the lists say, and no inherited
/// variable whose name says it holds a credential ([`infergate_io::redact::is_secret_name`]:
/// `HF_TOKEN` under the built-in `HF_` prefix, `NCCL_PASSWORD`, `DEPLOY_CRED` under `DEPLOY_*`).
pub(crate) fn engine_env(
    gate_env: impl IntoIterator<Item = (String, String)>,
    env_allow: &[String],
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = gate_env
        .into_iter()
        .filter(|(k, _)| {
            ENV_ALLOW.iter().any(|e| allowed(k, e)) || env_allow.iter().any(|e| allowed(k, e))
        })
        .filter(|(k, _)| !infergate_io::redact::never_for_engine(k))
        .filter(|(k, _)| !infergate_io::redact::is_secret_name(k))
        .filter(|(k, _)| !extra.iter().any(|(x, _)| x == k))
        .collect();
    env.extend(
        extra
            .iter()
            .filter(|(k, _)| !infergate_io::redact::never_for_engine(k))
            .cloned(),
    );
    env.sort();
    env
}

/// Words of a shell line, for finding secret flags (quotes removed; good enough for
/// `--api-key 'sk-…'` and `--token="…"`, not a shell parser).
pub(crate) fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() || ";&|()".contains(c) => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Every secret value of one engine: its API key, `[engine] env` values whose names say
/// secret, and the values of secret-looking flags (and `[engine] secret_args`) on its command
/// line and in `--engine-arg`s.
pub(crate) fn secret_values(cfg: &EngineConfig, extra_args: &[String]) -> Vec<String> {
    let mut words: Vec<String> = match &cfg.command {
        CommandSpec::Argv(v) => v.clone(),
        CommandSpec::Shell(line) => shell_words(line),
    };
    words.extend(extra_args.iter().cloned());
    let mut out = infergate_io::redact::secret_flag_values(&words, &cfg.secret_args);
    out.extend(cfg.api_key_env.as_ref().and_then(|k| std::env::var(k).ok()));
    out.extend(
        cfg.env
            .iter()
            .filter(|(k, _)| infergate_io::redact::is_secret_name(k))
            .map(|(_, v)| v.clone()),
    );
    out
}

/// The command of `cfg` as the engine executes it (`{infergate}` as the descriptor of
/// `self_exec`, where there is one) and as people and results see it (the binary's path,
/// secrets masked): placeholders rendered (shell-quoted in a shell line), `extra_args` appended.
fn command(
    cfg: &EngineConfig,
    extra_args: &[String],
    ph: &Placeholders,
    self_exec: Option<&SelfExec>,
) -> (Vec<String>, String) {
    let render = |ph: &Placeholders| -> Vec<String> {
        match &cfg.command {
            CommandSpec::Argv(v) => v
                .iter()
                .map(|a| ph.render(a, false))
                .chain(extra_args.iter().cloned())
                .collect(),
            CommandSpec::Shell(line) => {
                let mut l = ph.render(line, true);
                for a in extra_args {
                    l.push(' ');
                    l.push_str(&shell_quote(a));
                }
                vec!["sh".into(), "-c".into(), l]
            }
        }
    };
    let shown = render(ph);
    let argv = match self_exec {
        Some(s) => render(&Placeholders {
            infergate: s.path(),
            ..ph.clone()
        }),
        None => shown.clone(),
    };
    let redactor = infergate_io::redact::process();
    let display = match &cfg.command {
        CommandSpec::Argv(_) => shown
            .iter()
            .map(|a| shell_quote(&redactor.redact(a)))
            .collect::<Vec<_>>()
            .join(" "),
        CommandSpec::Shell(_) => redactor.redact(shown.last().map_or("", String::as_str)),
    };
    (argv, display)
}

impl EngineLaunch {
    /// Resolves the config's command for one boot: picks the port, renders placeholders
    /// (shell-quoted in a shell line), appends `extra_args` (`--engine-arg`), builds the
    /// engine's environment, reads the API key, and registers every secret of it with the
    /// process's redactor.
    pub fn from_config(
        cfg: &EngineConfig,
        model: Option<&str>,
        extra_args: &[String],
        log_path: PathBuf,
    ) -> Result<EngineLaunch, EngineError> {
        infergate_io::redact::register(secret_values(cfg, extra_args));
        let port = cfg.port.map_or_else(|| free_port(&cfg.host), Ok)?;
        let exe = std::env::current_exe().map_err(|source| EngineError::Spawn {
            program: "infergate (this binary, for {infergate} and the supervisor)".into(),
            source,
            hint: "the gate could not find its own executable".into(),
        })?;
        let self_exec = SelfExec::open(cfg.isolation);
        let ph = Placeholders {
            port,
            host: cfg.host.clone(),
            model: model.map(str::to_string),
            infergate: exe.display().to_string(),
        };
        let (argv, display) = command(cfg, extra_args, &ph, self_exec.as_ref());
        let host_in_url = if cfg.host == "0.0.0.0" {
            "127.0.0.1"
        } else {
            cfg.host.as_str()
        };
        let extra_env: Vec<(String, String)> = cfg
            .env
            .iter()
            .map(|(k, v)| (k.clone(), ph.render(v, false)))
            .collect();
        let gate_env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let env = engine_env(gate_env, &cfg.env_allow, &extra_env);
        // The values the config's `env_allow` lets through are the runner's, not the config's:
        // masked in every log and output like secrets (short ones excepted, see `redact`);
        // not an existing absolute path (a venv's python, a model): that names what the
        // engine runs or reads, which the message about an engine that cannot start must
        // show. Secret-like names never reach the engine ([`engine_env`]).
        infergate_io::redact::register(
            env.iter()
                .filter(|(k, v)| {
                    cfg.env_allow.iter().any(|e| allowed(k, e))
                        && !ENV_ALLOW.iter().any(|e| allowed(k, e))
                        && !extra_env.iter().any(|(x, _)| x == k)
                        && !names_a_path(v)
                })
                .map(|(_, v)| v.clone()),
        );
        Ok(EngineLaunch {
            argv,
            env,
            workdir: cfg.workdir.clone(),
            display,
            log_path,
            base_url: format!("http://{host_in_url}:{port}"),
            readiness_timeout: Duration::from_secs_f64(cfg.readiness_timeout_s),
            stop_grace: cfg
                .stop_grace_s
                .map_or_else(default_stop_grace, Duration::from_secs_f64),
            api_key: cfg
                .api_key_env
                .as_ref()
                .and_then(|k| std::env::var(k).ok())
                .filter(|k| !k.is_empty()),
            supervisor: exe,
            isolation: cfg.isolation,
            self_exec,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    pub(crate) fn cfg(cmd: CommandSpec) -> EngineConfig {
        EngineConfig {
            command: cmd,
            env: BTreeMap::from([("X".to_string(), "p={port}".to_string())]),
            workdir: None,
            readiness_timeout_s: 2.0,
            log_file: None,
            stop_grace_s: Some(1.0),
            api_key_env: None,
            env_allow: Vec::new(),
            secret_args: Vec::new(),
            host: "127.0.0.1".into(),
            port: Some(4321),
            name: None,
            watchdog: infergate_config::config::WatchdogConfig::default(),
            isolation: EngineIsolation::Auto,
        }
    }

    /// [`cfg`] of `cmd` and its launch (no model, no extra arguments).
    pub(crate) fn launch_of(cmd: CommandSpec) -> (EngineConfig, EngineLaunch) {
        let c = cfg(cmd);
        let l = EngineLaunch::from_config(&c, None, &[], "l.log".into()).expect("launch");
        (c, l)
    }

    #[test]
    fn placeholders_and_extra_args_are_rendered() {
        let c = cfg(CommandSpec::Argv(vec![
            "{infergate}".into(),
            "serve".into(),
            "{model}".into(),
            "--port={port}".into(),
        ]));
        let l = EngineLaunch::from_config(&c, Some("m/x"), &["--flag".into()], "l.log".into())
            .expect("launch");
        assert!(!l.argv[0].contains('{'));
        assert_eq!(&l.argv[1..], &["serve", "m/x", "--port=4321", "--flag"]);
        assert!(l.env.contains(&("X".to_string(), "p=4321".to_string())));
        assert_eq!(l.base_url, "http://127.0.0.1:4321");
        let s = cfg(CommandSpec::Shell("exec e --port {port}".into()));
        let l =
            EngineLaunch::from_config(&s, None, &["a b".into()], "l.log".into()).expect("launch");
        assert_eq!(l.argv, vec!["sh", "-c", "exec e --port 4321 'a b'"]);
    }

    #[test]
    fn every_placeholder_is_shell_quoted_in_a_shell_line() {
        let mut s = cfg(CommandSpec::Shell(
            "exec serve --model {model} --host {host} --port {port}".into(),
        ));
        s.host = "h;rm -rf x".into();
        let l = EngineLaunch::from_config(&s, Some("m$(touch PWNED)'x"), &[], "l.log".into())
            .expect("launch");
        assert_eq!(
            l.argv[2],
            "exec serve --model 'm$(touch PWNED)'\\''x' --host 'h;rm -rf x' --port 4321"
        );
        // In an argument vector nothing is interpreted: the value is passed as it is.
        let a = cfg(CommandSpec::Argv(vec!["serve".into(), "{model}".into()]));
        let l = EngineLaunch::from_config(&a, Some("m$(x)"), &[], "l.log".into()).expect("launch");
        assert_eq!(l.argv, vec!["serve", "m$(x)"]);
    }

    #[test]
    fn engine_env_is_an_allow_list_without_the_gate_credentials() {
        let gate: Vec<(String, String)> = [
            ("PATH", "/bin"),
            ("HOME", "/home/r"),
            ("LC_ALL", "C.UTF-8"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("HF_TOKEN", "hf_abcdefgh"),
            ("GITHUB_TOKEN", "ghs_secret"),
            ("INFERGATE_GITHUB_TOKEN", "ghs_secret2"),
            ("ACTIONS_RUNTIME_TOKEN", "rt"),
            ("GITHUB_SHA", "abc"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("MY_SETTING", "1"),
            ("MY_DEPLOY_CRED", "cred-123456"),
            ("NCCL_PASSWORD", "nccl-pw-123"),
            ("OTHER", "2"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let env = engine_env(
            gate,
            &["MY_*".into(), "ACTIONS_RUNTIME_TOKEN".into()],
            &[
                ("X".into(), "y".into()),
                ("GITHUB_TOKEN".into(), "z".into()),
            ],
        );
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "CUDA_VISIBLE_DEVICES",
                "HOME",
                "LC_ALL",
                "MY_SETTING",
                "PATH",
                "X"
            ]
        );
    }

    #[test]
    fn secrets_of_the_command_line_are_found_and_masked_in_the_display() {
        let mut c = cfg(CommandSpec::Shell(
            "exec serve --api-key 'sk-live-123456' --hf-token=\"hf_zzzzzz9\" --opaque op-77777777"
                .into(),
        ));
        c.secret_args = vec!["--opaque".into()];
        c.env.insert("ENGINE_PASSWORD".into(), "pw-888888".into());
        let v = secret_values(&c, &["--token=tok-999999".into()]);
        for s in [
            "sk-live-123456",
            "hf_zzzzzz9",
            "op-77777777",
            "tok-999999",
            "pw-888888",
        ] {
            assert!(v.iter().any(|x| x == s), "{s} in {v:?}");
        }
        let l = EngineLaunch::from_config(&c, None, &["--token=tok-999999".into()], "l.log".into())
            .expect("launch");
        for s in ["sk-live-123456", "hf_zzzzzz9", "op-77777777", "tok-999999"] {
            assert!(!l.display.contains(s), "{}", l.display);
            assert!(!infergate_io::redact::redact(&format!("x {s} y")).contains(s));
        }
        assert!(
            l.display.contains("--api-key '[REDACTED]'"),
            "{}",
            l.display
        );
    }
}
