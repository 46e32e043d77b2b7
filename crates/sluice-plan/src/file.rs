//! Plan files: a user's own assignment of operators to threads and of threads to processing
//! elements (PEs, OS processes), with transports pinned per edge, in TOML.
//!
//! ```toml
//! queue_capacity = 8192          # optional: messages per threaded port
//!
//! [[thread]]
//! name = "ingest"
//! pe = "left"                    # optional: the PE running it; "main" when absent
//! operators = ["source", "split"]
//! core = 0                       # optional: pin the thread
//! host = "a"                     # optional: the host of its PE (a hosts file's name)
//!
//! [[thread]]
//! name = "count"
//! pe = "right"
//! operators = ["sum[0]", "sum[1]", "sink"]   # `op` places every instance, `op[i]` one
//!
//! [[edge]]                       # optional: pin the transport of an edge between PEs
//! from = "split"
//! to = "sum"
//! transport = { kind = "shm-vega", slot_bytes = 256, slots = 4096 }
//!
//! [[replicate]]                  # optional: run an operator that declared itself
//! operator = "split"             # replicable as this many instances (a replication
//! parallelism = 4                # optimizer's output); its forward input is then spread
//! ```                            # as it declared (round robin, or key-by)

use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_transport::TransportSpec;

use crate::TomlSyntaxError;

/// A parsed plan file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Messages per threaded port; the default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_capacity: Option<usize>,
    /// The threads, each with its operators.
    #[serde(rename = "thread", default)]
    pub threads: Vec<ThreadSpec>,
    /// Transports pinned per logical edge.
    #[serde(rename = "edge", default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeSpec>,
    /// Operators run with more (or fewer) instances than the application gave them.
    #[serde(rename = "replicate", default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaSpec>,
}

/// An operator's parallelism, set by a plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaSpec {
    /// The operator's name.
    pub operator: String,
    /// Its instances.
    pub parallelism: usize,
}

/// A transport the user pins for every physical edge of one logical edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeSpec {
    /// The upstream operator's name.
    pub from: String,
    /// The downstream operator's name.
    pub to: String,
    /// The transport and its parameters.
    pub transport: TransportSpec,
}

/// One thread of a plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadSpec {
    /// The thread's name.
    pub name: String,
    /// Operators (`name`) or instances (`name[i]`) it runs.
    pub operators: Vec<String>,
    /// The core to pin it to.
    #[serde(default)]
    pub core: Option<usize>,
    /// The PE (process) it runs in; threads naming no PE share the PE `main`.
    #[serde(default)]
    pub pe: Option<String>,
    /// The host its PE runs on, by its name in the hosts file; the threads of one PE must not
    /// name different hosts. The planner places PEs naming none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl PlanFile {
    /// Parses a plan file; errors carry the line and column.
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Decodes `text`, the contents of the plan file at `path`; the error names the file, the
    /// line and the column.
    pub fn read(path: &Path, text: &str) -> Result<Self, TomlSyntaxError> {
        Self::parse(text).map_err(|e| TomlSyntaxError::new("plan file", path, text, &e))
    }
}
