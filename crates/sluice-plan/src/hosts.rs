//! Hosts files: the machines a job may use, in TOML.
//!
//! ```toml
//! [[host]]
//! name = "a"
//! address = "10.0.0.1"            # receivers of network transports bind here
//! cores = 8
//! groups = ["rack1"]              # optional: named groups, for placement constraints
//! launch = ["ssh", "a"]           # optional: command prefix that runs a program there
//!
//! [[host]]
//! name = "b"
//! address = "10.0.0.2"
//! cores = 8
//! launch = ["ip", "netns", "exec", "b"]
//!
//! [launcher]                      # optional
//! address = "10.0.0.254"          # the launcher listens for its PEs here (TCP)
//! ```
//!
//! Without a hosts file a job has one host, `localhost` (127.0.0.1, this machine's cores).
//! With one, PEs reach their launcher over TCP at the `[launcher]` address; without that
//! setting, at the address of this machine that its routes use toward the hosts.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::TomlSyntaxError;

/// Why a hosts file was refused.
#[derive(Debug, Error)]
pub enum HostsError {
    /// It is not valid TOML for a hosts file; the error carries the position.
    #[error(transparent)]
    Syntax(#[from] toml::de::Error),
    /// It parses but makes no sense.
    #[error("{0}")]
    Invalid(String),
}

/// Why a hosts file read from a path was refused, with the path, and the line and column of
/// a syntax error.
#[derive(Debug, Error)]
pub enum HostsFileError {
    /// It is not valid TOML for a hosts file.
    #[error(transparent)]
    Syntax(#[from] TomlSyntaxError),
    /// It parses but makes no sense.
    #[error("hosts file {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// A parsed hosts file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    /// The hosts, in the order PEs are spread over them.
    #[serde(rename = "host")]
    pub hosts: Vec<HostSpec>,
    /// Where the launcher meets its PEs.
    #[serde(default)]
    pub launcher: LauncherSpec,
}

/// The `[launcher]` table: how the PEs on the hosts reach the launcher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LauncherSpec {
    /// The address of the launcher's machine its control listener binds to (alone) and every
    /// PE connects to; by default the one this machine's routes use toward the hosts.
    #[serde(default)]
    pub address: Option<IpAddr>,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Its name, used in plans and placement constraints.
    pub name: String,
    /// The address its PEs' network receivers bind to and senders connect to.
    pub address: IpAddr,
    /// Cores PEs may use there.
    #[serde(default = "one")]
    pub cores: usize,
    /// The groups it belongs to.
    #[serde(default)]
    pub groups: Vec<String>,
    /// A command prefix that runs a program on the host (`ssh NAME`, `ip netns exec NAME`);
    /// empty for this machine.
    #[serde(default)]
    pub launch: Vec<String>,
}

fn one() -> usize {
    1
}

impl HostsFile {
    /// Parses a hosts file; errors carry the line and column. Names must be unique, non-empty
    /// and free of spaces and control characters; every host must have a core; a launch
    /// prefix's words must be non-empty and free of NUL bytes.
    pub fn parse(text: &str) -> Result<Self, HostsError> {
        let file: Self = toml::from_str(text)?;
        let invalid = |m: String| Err(HostsError::Invalid(m));
        if file.hosts.is_empty() {
            return invalid("the hosts file lists no [[host]]".into());
        }
        for (i, h) in file.hosts.iter().enumerate() {
            if file.hosts[..i].iter().any(|o| o.name == h.name) {
                return invalid(format!("host '{}' is listed twice", h.name));
            }
            if h.name.is_empty() || h.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return invalid(format!(
                    "host name '{}' is empty or holds a space or a control character (it is a \
                     line of mpirun's hostfile and an argument of its -host)",
                    h.name.escape_debug()
                ));
            }
            if h.cores == 0 {
                return invalid(format!("host '{}' has cores = 0", h.name));
            }
            if let Some(word) = h.launch.iter().find(|w| w.is_empty() || w.contains('\0')) {
                return invalid(format!(
                    "host '{}': launch word '{}' is empty or holds a NUL byte (it is an \
                     argument of a command)",
                    h.name,
                    word.escape_debug()
                ));
            }
        }
        Ok(file)
    }

    /// Decodes `text`, the contents of the hosts file at `path` ([`HostsFile::parse`]); the
    /// error names the file, and the line and column of a syntax error.
    pub fn read(path: &Path, text: &str) -> Result<Self, HostsFileError> {
        Self::parse(text).map_err(|e| match e {
            HostsError::Syntax(e) => TomlSyntaxError::new("hosts file", path, text, &e).into(),
            HostsError::Invalid(reason) => HostsFileError::Invalid {
                path: path.display().to_string(),
                reason,
            },
        })
    }

    /// The single host of a job without a hosts file: this machine.
    pub fn localhost(cores: usize) -> Self {
        Self {
            hosts: vec![HostSpec {
                name: "localhost".into(),
                address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                cores: cores.max(1),
                groups: Vec::new(),
                launch: Vec::new(),
            }],
            launcher: LauncherSpec::default(),
        }
    }
}
