//! Secret values the gate must never write or print: the GitHub and runner tokens in its own
//! environment, the engine's API key, and secrets on the engine's command line.
//!
//! One [`Redactor`] per process ([`process`]): it starts with the secrets of the gate's
//! environment and grows as engines are launched (each launch registers the secrets of its
//! config and command line before anything of the engine is written). Every sink applies it:
//! the engine log writer, the results (redacted as a whole before they are written), and
//! [`crate::untrusted_text`], which every piece of external text passes through before it is
//! printed or posted. This module is a leaf: it imports nothing of the crate.

use std::sync::{Arc, LazyLock, PoisonError, RwLock};

/// What a secret is replaced with.
pub(crate) const MASK: &str = "[REDACTED]";

/// Values shorter than this are not treated as secrets: masking `1` or `auto` everywhere would
/// destroy the output and protect nothing.
pub(crate) const MIN_SECRET_LEN: usize = 6;

/// Replaces known secret values with [`MASK`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for `values` (short and empty ones ignored).
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut r = Redactor::default();
        r.extend(values);
        r
    }

    /// The secrets of an environment: every variable whose name says it holds a credential
    /// ([`is_secret_name`]).
    pub(crate) fn from_env_vars(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        Redactor::new(
            vars.into_iter()
                .filter(|(k, _)| is_secret_name(k))
                .map(|(_, v)| v),
        )
    }

    /// Adds more secrets.
    pub(crate) fn extend(&mut self, values: impl IntoIterator<Item = String>) {
        for v in values {
            let v = v.trim().to_string();
            if v.chars().count() >= MIN_SECRET_LEN && !self.secrets.contains(&v) {
                self.secrets.push(v);
            }
        }
        self.secrets
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }

    /// Redacts every string inside a JSON value (keys included), in place.
    pub(crate) fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.redact_json(&mut v);
                    map.insert(self.redact(&k), v);
                }
            }
            _ => {}
        }
    }

    /// `value` with every string in it redacted (round trip through JSON); `value` itself when
    /// it holds no secret or does not round-trip.
    pub fn redact_serde<T>(&self, value: T) -> T
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        if self.is_empty() {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        let before = json.clone();
        self.redact_json(&mut json);
        if json == before {
            return value;
        }
        serde_json::from_value(json).unwrap_or(value)
    }
}

/// Name parts that say a variable holds a credential, anywhere in the (upper-cased) name.
pub(crate) const SECRET_NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "API_KEY",
    "APIKEY",
    "CRED",
    "JWT",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "SIGNATURE",
];

/// Whether an environment variable name says it holds a credential: a name with one of
/// [`SECRET_NAME_PARTS`] (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*PASSPHRASE*`,
/// `*API_KEY*`, `*APIKEY*`, `*CRED*` (credentials), `*JWT*`, `*COOKIE*`, `*SESSION*`,
/// `*PRIVATE*`, `*SIGNATURE*`), `AUTH` (`*AUTH*`: `OAUTH_*`, `*_AUTHORIZATION`,
/// `SSH_AUTH_SOCK`; not `AUTHOR`, as in `GIT_AUTHOR_NAME`), a word starting or ending with
/// `PASS` (`PASS`, `DB_PASS`, `MYSQLPASS`), a name ending in `_KEY`, and the runner's
/// `ACTIONS_RUNTIME_*`.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    let auth = n.match_indices("AUTH").any(|(i, _)| {
        let rest = &n[i + 4..];
        !rest.starts_with("OR") || rest.starts_with("ORIZ")
    });
    let pass_word = n
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.starts_with("PASS") || w.ends_with("PASS"));
    SECRET_NAME_PARTS.iter().any(|w| n.contains(w))
        || auth
        || pass_word
        || n.ends_with("_KEY")
        || n.starts_with("ACTIONS_RUNTIME")
}

/// Whether a command-line flag's value is a secret: `--api-key`, `--hf-token`, `--token`,
/// `*-key`, `*token*`, `*secret*`, `*password*` (case-insensitive, `_` same as `-`), or a flag
/// the config lists in `[engine] secret_args`.
pub(crate) fn is_secret_flag(flag: &str, extra: &[String]) -> bool {
    let norm = |s: &str| {
        s.trim_start_matches('-')
            .to_ascii_lowercase()
            .replace('_', "-")
    };
    let f = norm(flag);
    if f.is_empty() || !flag.starts_with('-') {
        return false;
    }
    extra.iter().any(|e| norm(e) == f)
        || f.ends_with("-key")
        || f == "key"
        || ["token", "secret", "password", "passwd"]
            .iter()
            .any(|w| f.contains(w))
}

/// The values of secret flags in one command line: `--flag value` and `--flag=value`.
pub fn secret_flag_values(words: &[String], extra: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if let Some((flag, value)) = w.split_once('=')
            && is_secret_flag(flag, extra)
        {
            out.push(value.to_string());
        } else if is_secret_flag(w, extra)
            && let Some(next) = words.get(i + 1)
        {
            out.push(next.clone());
            i += 1;
        }
        i += 1;
    }
    out
}

/// Whether the engine must never receive this variable, whatever the config says: the gate's
/// GitHub tokens and the runner's `ACTIONS_*` credentials and URLs, and any `GITHUB_*` token.
pub fn never_for_engine(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n == "GITHUB_TOKEN"
        || n == "INFERGATE_GITHUB_TOKEN"
        || n.starts_with("ACTIONS_")
        || (n.starts_with("GITHUB_") && is_secret_name(&n))
}

static PROCESS: LazyLock<RwLock<Arc<Redactor>>> = LazyLock::new(|| {
    RwLock::new(Arc::new(Redactor::from_env_vars(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )))
});

/// This process's redactor (the gate's environment secrets plus every registered one).
pub fn process() -> Arc<Redactor> {
    PROCESS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Registers more secrets with this process's redactor (before anything that may contain them
/// is written).
pub fn register(values: impl IntoIterator<Item = String>) {
    let values: Vec<String> = values.into_iter().collect();
    if values.is_empty() {
        return;
    }
    let mut guard = PROCESS.write().unwrap_or_else(PoisonError::into_inner);
    let mut next = (**guard).clone();
    next.extend(values);
    *guard = Arc::new(next);
}

/// `text` through this process's redactor.
pub fn redact(text: &str) -> String {
    process().redact(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_longest_first_and_ignores_short_values() {
        let r = Redactor::new(["sk-abcdef".into(), "sk-abcdef-long".into(), "1".into()]);
        assert_eq!(
            r.redact("a sk-abcdef-long b sk-abcdef c 1"),
            "a [REDACTED] b [REDACTED] c 1"
        );
    }

    #[test]
    fn env_secrets_are_found_by_name() {
        let r = Redactor::from_env_vars([
            ("GITHUB_TOKEN".into(), "ghs_xxxxxxxx".into()),
            ("MY_API_KEY".into(), "key-123456".into()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ]);
        assert_eq!(
            r.redact("ghs_xxxxxxxx key-123456 /usr/bin:/bin"),
            "[REDACTED] [REDACTED] /usr/bin:/bin"
        );
    }

    #[test]
    fn secret_flags_and_their_values() {
        let w: Vec<String> = [
            "serve",
            "--api-key",
            "sk-one-111",
            "--hf-token=hf_two_222",
            "--port",
            "8000",
            "--db-password",
            "pw-three-3",
            "--my-flag",
            "custom-44444",
            "--client_secret=cs-5555555",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = secret_flag_values(&w, &["--my-flag".into()]);
        assert_eq!(
            v,
            vec![
                "sk-one-111",
                "hf_two_222",
                "pw-three-3",
                "custom-44444",
                "cs-5555555"
            ]
        );
        assert!(!is_secret_flag("--port", &[]));
        assert!(
            !is_secret_flag("token", &[]),
            "a positional word is no flag"
        );
    }

    #[test]
    fn credential_names_table() {
        let secret = [
            "HF_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "MYSQL_PASSWD",
            "GPG_PASSPHRASE",
            "OPENAI_API_KEY",
            "OPENAI_APIKEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "DEPLOY_CRED",
            "AUTH",
            "OAUTH_CLIENT",
            "HTTP_AUTHORIZATION",
            "BASIC_AUTH_HEADER",
            "SSH_AUTH_SOCK",
            "JWT",
            "MY_JWT_KEYS",
            "COOKIE",
            "SESSION_ID",
            "PASS",
            "DB_PASS",
            "REDIS_PASS_FILE",
            "PRIVATE",
            "SSH_PRIVATE_FILE",
            "REQUEST_SIGNATURE",
            "SIGNING_KEY",
            "ACTIONS_RUNTIME_URL",
            "hf_token",
        ];
        for n in secret {
            assert!(is_secret_name(n), "{n} should read as a credential");
        }
        let plain = [
            "PATH",
            "HOME",
            "CUDA_VISIBLE_DEVICES",
            "VLLM_USE_V1",
            "NCCL_DEBUG",
            "HF_HOME",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "KEYBOARD",
            "OMP_NUM_THREADS",
        ];
        for n in plain {
            assert!(!is_secret_name(n), "{n} should not read as a credential");
        }
    }

    #[test]
    fn the_engine_never_gets_the_gate_credentials() {
        for n in [
            "GITHUB_TOKEN",
            "INFERGATE_GITHUB_TOKEN",
            "ACTIONS_RUNTIME_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            "GITHUB_APP_TOKEN",
        ] {
            assert!(never_for_engine(n), "{n}");
        }
        for n in ["PATH", "HF_TOKEN", "GITHUB_SHA", "CUDA_VISIBLE_DEVICES"] {
            assert!(!never_for_engine(n), "{n}");
        }
    }

    #[test]
    fn json_strings_and_keys_are_redacted() {
        let r = Redactor::new(["topsecret".into()]);
        let mut v = serde_json::json!({"a": ["x topsecret y", 3], "topsecret": true});
        r.redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [REDACTED] y", 3], "[REDACTED]": true})
        );
    }
}
