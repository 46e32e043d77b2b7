//! Placement constraints an application puts on its operators, as in IBM Streams: run on a
//! named host or in a group of hosts, share a host with another operator, never share one, or
//! run alone in a process. The planner honours them or refuses with the constraint it cannot
//! meet.

use serde::{Deserialize, Serialize};

/// One placement constraint on every instance of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Run on the host of this name.
    Host(String),
    /// Run on a host of this group.
    Group(String),
    /// Run on the same host as the operator of this name.
    ColocateWith(String),
    /// Never run on the same host as the operator of this name.
    ExlocateFrom(String),
    /// Run alone in a PE (process) of its own.
    Isolated,
}

impl Placement {
    /// The other operator the constraint names, if any.
    pub fn other_operator(&self) -> Option<&str> {
        match self {
            Self::ColocateWith(op) | Self::ExlocateFrom(op) => Some(op),
            _ => None,
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host(h) => write!(f, "on host '{h}'"),
            Self::Group(g) => write!(f, "in host group '{g}'"),
            Self::ColocateWith(op) => write!(f, "on the same host as '{op}'"),
            Self::ExlocateFrom(op) => write!(f, "never on the same host as '{op}'"),
            Self::Isolated => f.write_str("alone in its own PE"),
        }
    }
}
