//! Plan files: a user's own assignment of operators to threads, in TOML.
//!
//! ```toml
//! queue_capacity = 8192          # optional: messages per threaded port
//!
//! [[thread]]
//! name = "ingest"
//! operators = ["source", "split"]
//! core = 0                       # optional: pin the thread
//!
//! [[thread]]
//! name = "count"
//! operators = ["sum[0]", "sum[1]", "sink"]   # `op` places every instance, `op[i]` one
//! ```

use serde::{Deserialize, Serialize};

/// A parsed plan file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Messages per threaded port; the default when absent.
    #[serde(default)]
    pub queue_capacity: Option<usize>,
    /// The threads, each with its operators.
    #[serde(rename = "thread", default)]
    pub threads: Vec<ThreadSpec>,
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
}

impl PlanFile {
    /// Parses a plan file; errors carry the line and column.
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}
