//! Flag values that more than one command takes, and the checks of every flag value: each is
//! a clap value parser, so that a bad value is clap's usage error (exit 2) with celgate's own
//! words, naming the flag and the value, whichever command and flag it comes from. Durations
//! are Go's (`time.ParseDuration`, as apimachinery's `metav1.Duration`), Kubernetes versions
//! are read as kubectl prints them (`1.30`, `v1.30.2`).

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{TypedValueParser, ValueParserFactory};
use clap::error::ErrorKind;

use celgate::apimachinery::duration::parse_go_duration;
use celgate::cel::NEWEST_MINOR;

/// A library's error whose message is what celgate prints; boxed, so that the library may
/// give a typed error or a message.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a flag's value is refused. Every message names the flag (and mostly the value).
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("{flag} {text:?}: not a duration such as 10s or 500ms")]
    NotDuration { flag: String, text: String },
    #[error("{flag} {text:?}: must be more than zero")]
    NotPositive { flag: String, text: String },
    #[error("{flag} {text:?}: {source}")]
    NotNumber {
        flag: String,
        text: String,
        source: std::num::ParseIntError,
    },
    #[error("{flag} must be at least {least}")]
    TooSmall { flag: String, least: String },
    #[error("{flag}: {source}")]
    Version { flag: String, source: Cause },
    #[error("{flag} {text:?}: {source}")]
    Address {
        flag: String,
        text: String,
        source: std::net::AddrParseError,
    },
    #[error("{flag}: {source}")]
    Url {
        flag: String,
        source: axum::http::uri::InvalidUri,
    },
    /// The message names the flag and the name refused.
    #[error(transparent)]
    Namespaces(Cause),
    #[error("{flag} {shown}: must be a number of requests per second above 0")]
    Rate { flag: String, shown: String },
    #[error("{flag} {text:?}: not [NAMESPACE:]NAME of a service account")]
    ServiceAccount { flag: String, text: String },
    #[error("{flag}: expected a percentage from 0 to 100, got {shown}")]
    Percentage { flag: String, shown: String },
    #[error("{flag}: {source}")]
    Regex { flag: String, source: regex::Error },
    #[error("{flag} takes NAME=FILE, got {text:?}")]
    Var { flag: String, text: String },
}

/// A clap value parser from a check that takes the flag's name (`--listen`) and its value.
pub struct Checked<T: 'static>(pub fn(&str, &str) -> Result<T, FlagError>);

// Derived, these would need `T: Clone`; the parser is a function pointer whatever `T` is.
impl<T> Clone for Checked<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Checked<T> {}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Checked<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(clap::Arg::get_long)
            .map_or_else(String::new, |long| format!("--{long}"));
        let text = value
            .to_str()
            .ok_or_else(|| clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(cmd))?;
        // Formatted as clap's own usage errors are: the message, the usage, where to find help.
        // The command is cloned only on this path, where the process is about to exit.
        (self.0)(&flag, text).map_err(|e| cmd.clone().error(ErrorKind::ValueValidation, e))
    }
}

/// A Go duration of zero or more.
pub fn duration(flag: &str, text: &str) -> Result<Duration, FlagError> {
    parse_go_duration(text)
        .and_then(|n| u64::try_from(n).ok())
        .map(Duration::from_nanos)
        .ok_or_else(|| FlagError::NotDuration {
            flag: flag.into(),
            text: text.into(),
        })
}

/// A Go duration of more than zero.
pub fn positive_duration(flag: &str, text: &str) -> Result<Duration, FlagError> {
    match duration(flag, text)? {
        Duration::ZERO => Err(FlagError::NotPositive {
            flag: flag.into(),
            text: text.into(),
        }),
        d => Ok(d),
    }
}

/// A count of at least 1 (a limit that 0 would turn into a refusal of everything).
pub fn at_least_one<N>(flag: &str, text: &str) -> Result<N, FlagError>
where
    N: std::str::FromStr<Err = std::num::ParseIntError> + PartialOrd + std::fmt::Display + From<u8>,
{
    at_least(flag, text, N::from(1))
}

/// `--max-header-bytes`: hyper's least.
pub fn header_bytes(flag: &str, text: &str) -> Result<usize, FlagError> {
    at_least(flag, text, celgate::server::conn::MIN_HEADER_BYTES)
}

fn at_least<N>(flag: &str, text: &str, least: N) -> Result<N, FlagError>
where
    N: std::str::FromStr<Err = std::num::ParseIntError> + PartialOrd + std::fmt::Display,
{
    let n: N = text.parse().map_err(|source| FlagError::NotNumber {
        flag: flag.into(),
        text: text.into(),
        source,
    })?;
    if n < least {
        return Err(FlagError::TooSmall {
            flag: flag.into(),
            least: least.to_string(),
        });
    }
    Ok(n)
}

/// A socket address (`0.0.0.0:8443`, `[::1]:9090`).
pub fn address(flag: &str, text: &str) -> Result<SocketAddr, FlagError> {
    text.parse().map_err(|source| FlagError::Address {
        flag: flag.into(),
        text: text.into(),
        source,
    })
}

/// A socket address, or none for `off` (or an empty value).
pub fn optional_address(flag: &str, text: &str) -> Result<Option<SocketAddr>, FlagError> {
    match text {
        "off" | "" => Ok(None),
        other => address(flag, other).map(Some),
    }
}

/// An API server URL.
pub fn url(flag: &str, text: &str) -> Result<axum::http::Uri, FlagError> {
    text.parse().map_err(|source| FlagError::Url {
        flag: flag.into(),
        source,
    })
}

/// A rate in requests per second: finite and above 0.
pub fn rate(flag: &str, text: &str) -> Result<f64, FlagError> {
    match text.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps > 0.0 => Ok(qps),
        parsed => Err(FlagError::Rate {
            flag: flag.into(),
            shown: parsed.map_or_else(|_| text.into(), |qps| qps.to_string()),
        }),
    }
}

/// A percentage from 0 to 100.
pub fn percentage(flag: &str, text: &str) -> Result<f64, FlagError> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        parsed => Err(FlagError::Percentage {
            flag: flag.into(),
            shown: parsed.map_or_else(|_| text.into(), |p| p.to_string()),
        }),
    }
}

/// A regular expression (Rust's syntax).
pub fn regex(flag: &str, text: &str) -> Result<regex::Regex, FlagError> {
    regex::Regex::new(text).map_err(|source| FlagError::Regex {
        flag: flag.into(),
        source,
    })
}

/// A Kubernetes minor version of 1 whose CEL environment celgate knows (`--k8s-version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct K8sVersion(pub u16);

impl K8sVersion {
    /// The newest version celgate knows: the default.
    pub const NEWEST: K8sVersion = K8sVersion(NEWEST_MINOR);
}

/// As the default shows in `--help`.
impl std::fmt::Display for K8sVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl ValueParserFactory for K8sVersion {
    type Parser = Checked<K8sVersion>;
    fn value_parser() -> Self::Parser {
        Checked(|flag, text| {
            celgate::cel::parse_k8s_version(text)
                .map(K8sVersion)
                .map_err(|e| FlagError::Version {
                    flag: flag.into(),
                    source: e.into(),
                })
        })
    }
}

/// `--var NAME=FILE`.
#[derive(Clone, Debug)]
pub struct Var {
    pub name: String,
    pub file: PathBuf,
}

impl ValueParserFactory for Var {
    type Parser = Checked<Var>;
    fn value_parser() -> Self::Parser {
        Checked(|flag, text| {
            let (name, file) = text.split_once('=').ok_or_else(|| FlagError::Var {
                flag: flag.into(),
                text: text.into(),
            })?;
            Ok(Var {
                name: name.into(),
                file: file.into(),
            })
        })
    }
}

/// A comma-separated list of namespace names, sorted and without duplicates.
#[derive(Clone, Debug)]
pub struct Namespaces(pub Vec<String>);

impl ValueParserFactory for Namespaces {
    type Parser = Checked<Namespaces>;
    fn value_parser() -> Self::Parser {
        Checked(|_, text| {
            celgate::source::kube::param_namespaces(text)
                .map(Namespaces)
                .map_err(|e| FlagError::Namespaces(e.into()))
        })
    }
}

/// A service account, `[NAMESPACE:]NAME`; without a namespace, the caller picks one.
#[derive(Clone, Debug)]
pub struct ServiceAccount {
    pub namespace: Option<String>,
    pub name: String,
    /// As given, for messages.
    pub text: String,
}

impl ServiceAccount {
    /// A namespace or service account name: lowercase letters, digits, `-` and `.`, at most
    /// 253.
    pub fn is_name(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    }
}

impl ValueParserFactory for ServiceAccount {
    type Parser = Checked<ServiceAccount>;
    fn value_parser() -> Self::Parser {
        Checked(|flag, text| {
            let (namespace, name) = match text.split_once(':') {
                Some((ns, name)) => (Some(ns), name),
                None => (None, text),
            };
            if !namespace.is_none_or(ServiceAccount::is_name) || !ServiceAccount::is_name(name) {
                return Err(FlagError::ServiceAccount {
                    flag: flag.into(),
                    text: text.into(),
                });
            }
            Ok(ServiceAccount {
                namespace: namespace.map(str::to_string),
                name: name.into(),
                text: text.into(),
            })
        })
    }
}

/// Output as text or as JSON (`celgate serve --log-format`, `-o` of `lint` and `crd`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// A document printed as JSON (pretty) or YAML (`-o` of `eval` and `expr`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DocFormat {
    Json,
    Yaml,
}
